package worker

// CallSecret and CertSHA let the tests call a worker as its control plane
// does.
func CallSecret(w *Worker) string { return w.ident.callSecret }
func CertSHA(w *Worker) string    { return w.ident.certSHA }
