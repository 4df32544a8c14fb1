package catgen

import (
	"strings"
	"testing"
)

const head = "code\tname\thttp\tgrpc\trefusal\trefund\tretry_worker\tretry_client\tretry_after\tdoc\n"
const internalRow = "internal\tInternal\t500\tInternal\t-\tno\tno\tno\t-\ta bug\n"

// A bad row is an error naming its line and column, never a generated file.
func TestParseRefusesBadRows(t *testing.T) {
	for _, tc := range []struct{ row, want string }{
		{"queue_full\tQueueFull\t503\tResourceExhausted\tcapacity\tyes\tyes\tyes\t1 s\tfull\n", ""},
		{"queue_full\tQueueFull\t503\tResourceExhausted\tcapacity\tyes\tyes\tyes\t1 s\n", "want 10"},
		{"Queue\tQueueFull\t503\tResourceExhausted\t-\tno\tno\tno\t-\tx\n", "column code"},
		{"internal\tInternal2\t500\tInternal\t-\tno\tno\tno\t-\tx\n", "already on line"},
		{"a_b\tqueue\t503\tUnavailable\t-\tno\tno\tno\t-\tx\n", "column name"},
		{"a_b\tAB\t200\tUnavailable\t-\tno\tno\tno\t-\tx\n", "column http"},
		{"a_b\tAB\t503\tUnavailabel\t-\tno\tno\tno\t-\tx\n", "column grpc"},
		{"a_b\tAB\t503\tUnavailable\tbusy\tno\tno\tno\t-\tx\n", "column refusal"},
		{"a_b\tAB\t503\tUnavailable\t-\tmaybe\tno\tno\t-\tx\n", "column refund"},
		{"a_b\tAB\t503\tUnavailable\t-\tyes\tno\tno\t-\tx\n", "only a refusal refunds"},
		{"a_b\tAB\t503\tUnavailable\tcapacity\tyes\tno\tno\t1 s\tx\n", "column retry_client"},
		{"a_b\tAB\t503\tUnavailable\tcapacity\tyes\tno\tyes\t-\tx\n", "a refusal says when"},
		{"a_b\tAB\t400\tInvalidArgument\t-\tno\tyes\tno\t-\tx\n", "column retry_worker"},
		{"a_b\tAB\t400\tInvalidArgument\t-\tno\tno\tno\t\tx\n", "column retry_after"},
		{"a_b\tAB\t400\tInvalidArgument\t-\tno\tno\tno\t-\t \n", "column doc"},
	} {
		_, err := Parse([]byte("# comment\n" + head + internalRow + tc.row))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.row, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "catalogue.tsv:4")):
			t.Errorf("%q: error %v, want one on line 4 saying %q", tc.row, err, tc.want)
		}
	}
	if _, err := Parse([]byte("code\tname\n" + internalRow)); err == nil || !strings.Contains(err.Error(), "header") {
		t.Errorf("bad header: %v", err)
	}
	if _, err := Parse([]byte(head + "a_b\tAB\t400\tInvalidArgument\t-\tno\tno\tno\t-\tx\n")); err == nil || !strings.Contains(err.Error(), "internal") {
		t.Errorf("no internal code: %v", err)
	}
}

// The generated Go parses and names every code; the docs list every code.
func TestGenerate(t *testing.T) {
	goSrc, docs, err := Generate([]byte(head + internalRow + "queue_full\tQueueFull\t503\tResourceExhausted\tcapacity\tyes\tyes\tyes\tthe wait | rounded\tfull\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`QueueFull Code = "queue_full"`, "Refusal: RefusalCapacity, Refund: true, RetryWorker: true, RetryClient: true", "case QueueFull:\n\t\treturn 1"} {
		if !strings.Contains(string(goSrc), want) {
			t.Errorf("generated Go lacks %q:\n%s", want, goSrc)
		}
	}
	for _, want := range []string{"| `queue_full` | 503 | `ResourceExhausted` | full |", "| `queue_full` | capacity | yes | yes | yes | the wait \\| rounded |", "| `internal` | — | no | no | no | — |"} {
		if !strings.Contains(string(docs), want) {
			t.Errorf("docs lack %q:\n%s", want, docs)
		}
	}
}
