package oip

import (
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluiceml/sluice/internal/oip/inferencepb"
)

func TestDecode(t *testing.T) {
	cases := []struct {
		name, doc string
		want      Endpoint
	}{
		{"yaml", "address: 127.0.0.1:8001\nmodel: fraud\nversion: \"\"\ninput: input__0\noutput: output__0\ntimeout: 250ms\n",
			Endpoint{Address: "127.0.0.1:8001", Model: "fraud", Input: "input__0", Output: "output__0"}},
		{"json", `{"address": "triton.internal:8001", "model": "fraud", "version": "3", "input": "x", "output": "y"}`,
			Endpoint{Address: "triton.internal:8001", Model: "fraud", Version: "3", Input: "x", Output: "y"}},
		{"ipv6", "address: \"[::1]:8001\"\nmodel: m\ninput: x\noutput: y\n",
			Endpoint{Address: "[::1]:8001", Model: "m", Input: "x", Output: "y"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ep, err := Decode([]byte(c.doc))
			if err != nil {
				t.Fatal(err)
			}
			wantTimeout := DefaultTimeout
			if c.name == "yaml" {
				wantTimeout = 250 * time.Millisecond
			}
			if ep.Timeout.Duration != wantTimeout {
				t.Fatalf("timeout %v, want %v", ep.Timeout.Duration, wantTimeout)
			}
			ep.Timeout.Duration = 0
			if ep != c.want {
				t.Fatalf("got %+v, want %+v", ep, c.want)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	const ok = "address: 127.0.0.1:8001\nmodel: fraud\ninput: input__0\noutput: output__0\n"
	cases := []struct{ name, doc, want string }{
		{"empty", "", "oip: endpoint artifact: is empty"},
		{"not a mapping", "- a\n- b\n", "oip: endpoint artifact: "},
		{"unknown key", ok + "tls: true\n", `line 5: tls: unknown key "tls" (allowed here: address, model, version, input, output, timeout)`},
		{"case matters", strings.Replace(ok, "model:", "Model:", 1), `unknown key "Model"`},
		{"wrong type", strings.Replace(ok, "model: fraud", "model: [fraud]", 1), "model"},
		{"number for a name", ok + "version: 1\n", `line 5: version: expected a string, got 1 (quote it: "1")`},
		{"bool for a name", strings.Replace(ok, "output: output__0", "output: true", 1), `line 4: output: expected a string, got true`},
		{"duration not a string", ok + "timeout: 2\n", `line 5: timeout: expected a duration string like "50ms", got 2`},
		{"bad duration", ok + "timeout: soon\n", `timeout: invalid duration "soon"`},
		{"negative timeout", ok + "timeout: -1s\n", "line 5: timeout: must be between 1ms and 1m0s, got -1s"},
		{"tiny timeout", ok + "timeout: 10us\n", "timeout: must be at least 1ms, got 10µs"},
		{"huge timeout", ok + "timeout: 2h\n", "timeout: must be between 1ms and 1m0s, got 2h0m0s"},
		{"no address", strings.Replace(ok, "address: 127.0.0.1:8001\n", "", 1), "address: is required: host:port"},
		{"no port", strings.Replace(ok, "127.0.0.1:8001", "127.0.0.1", 1), `line 1: address: "127.0.0.1" is not host:port`},
		{"url", strings.Replace(ok, "127.0.0.1:8001", "\"http://x:8001\"", 1), `address: "http://x:8001" is not host:port`},
		{"port range", strings.Replace(ok, "8001", "70000", 1), `address: "127.0.0.1:70000": port must be a number between 1 and 65535`},
		{"every missing name", "address: 127.0.0.1:8001\n", "model: is required; input: is required; output: is required"},
		{"control chars", strings.Replace(ok, "model: fraud", "model: \"fr\\taud\"", 1), `line 2: model: "fr\taud" holds control characters`},
		{"long version", ok + "version: " + strings.Repeat("v", 300) + "\n", "version: is 300 bytes, at most 256 are allowed"},
		{"two documents", ok + "---\n" + ok, "holds more than one YAML document"},
		{"alias", "address: &a 127.0.0.1:8001\nmodel: *a\ninput: x\noutput: y\n", "oip: endpoint artifact: "},
		{"syntax", "address: [\n", "oip: endpoint artifact: "},
		{"too big", ok + "# " + strings.Repeat("x", MaxArtifactBytes) + "\n", "the limit is 65536"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.HasPrefix(err.Error(), "oip: endpoint artifact") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q\nwant it to contain %q", err, c.want)
			}
		})
	}
}

// FuzzDecode feeds arbitrary bytes (seeded from testdata/fuzz/FuzzDecode)
// to the artifact decoder: it returns an endpoint or an error, never
// panics, and whatever it accepts is a usable endpoint.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("address: 127.0.0.1:8001\nmodel: fraud\nversion: \"\"\ninput: input__0\noutput: output__0\ntimeout: 2s\n"))
	f.Add([]byte(`{"address": "[::1]:1", "model": "m", "input": "i", "output": "o"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ep, err := Decode(b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "oip: endpoint artifact") {
				t.Fatalf("error without prefix: %v", err)
			}
			return
		}
		if _, _, err := net.SplitHostPort(ep.Address); err != nil {
			t.Fatalf("accepted address %q: %v", ep.Address, err)
		}
		if ep.Model == "" || ep.Input == "" || ep.Output == "" {
			t.Fatalf("accepted %+v", ep)
		}
		if d := ep.Timeout.Duration; d < time.Millisecond || d > MaxTimeout {
			t.Fatalf("accepted timeout %v", d)
		}
	})
}

// FuzzOutput decodes arbitrary ModelInferResponse messages as the answer
// to a batch: a lying server gives an error, never a panic, and whatever is
// accepted has exactly n×k values.
func FuzzOutput(f *testing.F) {
	good, _ := proto.Marshal(&inferencepb.ModelInferResponse{
		Outputs:           []*inferencepb.ModelInferResponse_InferOutputTensor{{Name: "out", Datatype: "FP32", Shape: []int64{2, 1}}},
		RawOutputContents: [][]byte{make([]byte, 8)},
	})
	typed, _ := proto.Marshal(&inferencepb.ModelInferResponse{
		Outputs: []*inferencepb.ModelInferResponse_InferOutputTensor{{Name: "out", Datatype: "FP32", Shape: []int64{2, 1},
			Contents: &inferencepb.InferTensorContents{Fp32Contents: []float32{1, 2}}}},
	})
	f.Add(good, uint8(2), uint8(1))
	f.Add(typed, uint8(2), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, rows, cols uint8) {
		var resp inferencepb.ModelInferResponse
		if proto.Unmarshal(b, &resp) != nil {
			return
		}
		n, k := int(rows%64)+1, int(cols%8)+1
		m := &Model{ep: Endpoint{Output: "out"}, where: "fuzz", shape: shape{inputs: 1, outputs: k}}
		out, err := m.output(&resp, n)
		if err != nil {
			return
		}
		if out.Rows != n || out.Cols != k || len(out.Data) != n*k {
			t.Fatalf("accepted an answer of %d×%d (%d values) for %d×%d", out.Rows, out.Cols, len(out.Data), n, k)
		}
	})
}
