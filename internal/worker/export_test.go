package worker

// CallSecret and CertSHA let the tests call a worker as its control plane
// does.
func CallSecret(w *Worker) string { return w.ident.callSecret }
func CertSHA(w *Worker) string    { return w.ident.certSHA }

// OpenConns and OpenCalls are what the worker's listener holds now.
func OpenConns(w *Worker) int64 { return w.conns.Open() }
func OpenCalls(w *Worker) int64 { return w.calls.Open() }
