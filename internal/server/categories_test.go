package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/records"
)

// fraudEq is one fraud row (the example's four fields; country "" leaves
// the optional field out of every encoding).
type fraudEq struct {
	amount        float32
	age, declines int64
	country       string
}

// fraudEncodings sends rows to fraud through every encoding: /v1 JSON, OIP
// REST JSON, OIP REST binary (BYTES with length prefixes), gRPC raw and
// gRPC typed contents, each with the request id prefix+encoding. It
// returns each encoding's answer: riskScore per row, or the error message.
func fraudEncodings(t *testing.T, url string, c pb.GRPCInferenceServiceClient, prefix string, rows []fraudEq) map[string]any {
	t.Helper()
	out := map[string]any{}
	withCountry := rows[0].country != ""
	n := strconv.Itoa(len(rows))

	var v1 []string
	for _, r := range rows {
		s := fmt.Sprintf(`{"amount":%s,"accountAgeDays":%d,"declines5m":%d`, strconv.FormatFloat(float64(r.amount), 'g', -1, 32), r.age, r.declines)
		if withCountry {
			s += `,"country":` + strconv.Quote(r.country)
		}
		v1 = append(v1, s+"}")
	}
	res := post(t, url+"/v1/models/fraud:predict", "application/json", `{"instances":[`+strings.Join(v1, ",")+`]}`, map[string]string{"X-Request-Id": prefix + "v1"})
	if res.status != 200 {
		out["v1"] = res.err.Field + ": " + res.err.Message
	} else {
		var p struct{ Predictions []struct{ RiskScore float64 } }
		if err := json.Unmarshal(res.body, &p); err != nil {
			t.Fatal(err)
		}
		var s []float32
		for _, x := range p.Predictions {
			s = append(s, float32(x.RiskScore))
		}
		out["v1"] = s
	}

	type tensor struct {
		name, dt string
		json     []string
		raw      []byte
		contents *pb.InferTensorContents
	}
	ts := []*tensor{{name: "amount", dt: "FP32", contents: &pb.InferTensorContents{}}, {name: "accountAgeDays", dt: "INT64", contents: &pb.InferTensorContents{}},
		{name: "declines5m", dt: "INT64", contents: &pb.InferTensorContents{}}}
	if withCountry {
		ts = append(ts, &tensor{name: "country", dt: "BYTES", contents: &pb.InferTensorContents{}})
	}
	for _, r := range rows {
		ts[0].json = append(ts[0].json, strconv.FormatFloat(float64(r.amount), 'g', -1, 32))
		ts[0].raw = binary.LittleEndian.AppendUint32(ts[0].raw, math.Float32bits(r.amount))
		ts[0].contents.Fp32Contents = append(ts[0].contents.Fp32Contents, r.amount)
		for k, v := range []int64{r.age, r.declines} {
			ts[1+k].json = append(ts[1+k].json, strconv.FormatInt(v, 10))
			ts[1+k].raw = binary.LittleEndian.AppendUint64(ts[1+k].raw, uint64(v))
			ts[1+k].contents.Int64Contents = append(ts[1+k].contents.Int64Contents, v)
		}
		if withCountry {
			ts[3].json = append(ts[3].json, strconv.Quote(r.country))
			ts[3].raw = binary.LittleEndian.AppendUint32(ts[3].raw, uint32(len(r.country)))
			ts[3].raw = append(ts[3].raw, r.country...)
			ts[3].contents.BytesContents = append(ts[3].contents.BytesContents, []byte(r.country))
		}
	}
	oipAnswer := func(name string, res result) {
		if res.status != 200 {
			var e struct{ Error string }
			if err := json.Unmarshal(res.body, &e); err != nil || e.Error == "" {
				t.Fatalf("%s: %d %q", name, res.status, res.body)
			}
			out[name] = e.Error
			return
		}
		var p oipOut
		if err := json.Unmarshal(res.body, &p); err != nil || len(p.Outputs) != 1 || p.Outputs[0].Name != "riskScore" {
			t.Fatalf("%s: %s", name, res.body)
		}
		var s []float32
		for _, x := range p.Outputs[0].Data {
			s = append(s, float32(x))
		}
		out[name] = s
	}

	var js, hdr []string
	var data [][]byte
	for _, x := range ts {
		js = append(js, fmt.Sprintf(`{"name":%q,"shape":[%s],"datatype":%q,"data":[%s]}`, x.name, n, x.dt, strings.Join(x.json, ",")))
		hdr = append(hdr, fmt.Sprintf(`{"name":%q,"shape":[%s,1],"datatype":%q,"parameters":{"binary_data_size":%d}}`, x.name, n, x.dt, len(x.raw)))
		data = append(data, x.raw)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/v2/models/fraud/infer", strings.NewReader(`{"inputs":[`+strings.Join(js, ",")+`]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", prefix+"rest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res = result{status: resp.StatusCode, header: resp.Header}
	res.body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	oipAnswer("rest", res)
	oipAnswer("binary", binaryRequest(t, url+"/v2/models/fraud/infer", `{"inputs":[`+strings.Join(hdr, ",")+`]}`, map[string]string{"X-Request-Id": prefix + "binary"}, data...))

	for _, raw := range []bool{true, false} {
		name := "grpc-typed"
		if raw {
			name = "grpc-raw"
		}
		r := &pb.ModelInferRequest{ModelName: "fraud"}
		for _, x := range ts {
			it := &in{Name: x.name, Datatype: x.dt, Shape: []int64{int64(len(rows))}}
			if raw {
				r.RawInputContents = append(r.RawInputContents, x.raw)
			} else {
				it.Contents = x.contents
			}
			r.Inputs = append(r.Inputs, it)
		}
		resp, err := c.ModelInfer(metadata.AppendToOutgoingContext(context.Background(), "x-request-id", prefix+name), r)
		if err != nil {
			out[name] = status.Convert(err).Message()
			continue
		}
		var s []float32
		if raw {
			for i := 0; i < len(resp.RawOutputContents[0]); i += 4 {
				s = append(s, math.Float32frombits(binary.LittleEndian.Uint32(resp.RawOutputContents[0][i:])))
			}
		} else {
			s = resp.Outputs[0].Contents.Fp32Contents
		}
		out[name] = s
	}
	return out
}

// TestCategoriesEqualAcrossEncodings: the fraud example (a category field
// sent as BYTES; the other fields as FP32 and INT64) gives the same
// predictions to the bit and one input hash in the records through /v1
// JSON, OIP REST JSON, REST binary, gRPC raw and gRPC typed contents, the
// OIP ones straight into rows; with the optional category left out too;
// and a row the schema refuses gets one message, naming the input and
// row, from every OIP encoding.
func TestCategoriesEqualAcrossEncodings(t *testing.T) {
	url, c, store := recordedServer(t)
	ctx := context.Background()
	encodings := []string{"v1", "rest", "binary", "grpc-raw", "grpc-typed"}
	for _, set := range []struct {
		name string
		rows []fraudEq
	}{
		{"all fields", []fraudEq{{800, 91, 3, "US"}, {12.5, 2400, 0, "GB"}, {250.25, 10, 1, "DE"}, {0.1, 0, 7, "GB"}}},
		{"no country", []fraudEq{{800, 91, 3, ""}, {250, 10, 0, ""}}},
	} {
		t.Run(set.name, func(t *testing.T) {
			prefix := "cat-" + strings.ReplaceAll(set.name, " ", "-") + "-"
			got := fraudEncodings(t, url, c, prefix, set.rows)
			want, ok := got["v1"].([]float32)
			if !ok || len(want) != len(set.rows) {
				t.Fatalf("/v1: %v", got["v1"])
			}
			for _, e := range encodings {
				s, ok := got[e].([]float32)
				if !ok || len(s) != len(want) {
					t.Fatalf("%s: %v, /v1 %v", e, got[e], want)
				}
				for i := range want {
					if math.Float32bits(s[i]) != math.Float32bits(want[i]) {
						t.Errorf("%s row %d: %v, /v1 %v", e, i, s[i], want[i])
					}
				}
			}
			hash := ""
			for _, e := range encodings {
				recs, err := store.List(ctx, records.Filter{RequestID: prefix + e})
				if err != nil || len(recs) != 1 {
					t.Fatalf("records of %s: %v %v", e, recs, err)
				}
				if recs[0].InputHash == "" || hash != "" && recs[0].InputHash != hash {
					t.Errorf("%s: input hash %q, the others %q", e, recs[0].InputHash, hash)
				}
				hash = recs[0].InputHash
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		for k, c2 := range []struct {
			rows     []fraudEq
			v1, oipM string
		}{
			{[]fraudEq{{800, 91, 3, "US"}, {12.5, 2400, 0, "FR"}},
				`instances[1].country: unknown category "FR" (expected one of US, GB, DE)`, `input "country" row 1: unknown category "FR" (expected one of US, GB, DE)`},
			{[]fraudEq{{-5, 91, 3, "US"}}, `instances[0].amount: must be >= 0, got -5`, `input "amount" row 0: must be >= 0, got -5`},
			{[]fraudEq{{5, 91, -3, "US"}}, `instances[0].declines5m: must be >= 0, got -3`, `input "declines5m" row 0: must be >= 0, got -3`},
		} {
			got := fraudEncodings(t, url, c, "cat-refused-"+strconv.Itoa(k)+"-", c2.rows)
			for _, e := range encodings {
				want := c2.oipM
				if e == "v1" {
					want = c2.v1
				}
				if m, _ := got[e].(string); m != want {
					t.Errorf("%s: %v, want %q", e, got[e], want)
				}
			}
		}
	})
}
