package abstat

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// reference is testdata/reference.json, written by
// scripts/make_abstat_fixture.py with scipy.
type reference struct {
	Z975        float64 `json:"z975"`
	Experiments []struct {
		Name   string  `json:"name"`
		RawA   refArm  `json:"a"`
		RawB   refArm  `json:"b"`
		Config refCfg  `json:"config"`
		PrevP  float64 `json:"prevP"`
		Binary bool    `json:"binary"`
		Want   struct {
			A, B                                   refSummary
			Lift, LiftLow, LiftHigh                float64
			RelLift, RelLow, RelHigh               float64
			SeqLow, SeqHigh, SeqRelLow, SeqRelHigh float64
			Tau2, PValue                           float64
			Significant                            bool
			SRMPValue                              float64 `json:"srmPValue"`
			SRM                                    bool    `json:"srm"`
			Decision                               string
			WelchPValue                            float64
		} `json:"want"`
	} `json:"experiments"`
	Quality []struct {
		Name    string    `json:"name"`
		Kind    string    `json:"kind"`
		Pred    []float64 `json:"pred"`
		Label   []float64 `json:"label"`
		LogLoss *refEst   `json:"logLoss"`
		AUC     *refEst   `json:"auc"`
		MAE     *refEst   `json:"mae"`
		RMSE    *refEst   `json:"rmse"`
	} `json:"quality"`
}

type refArm struct {
	Units int64   `json:"units"`
	N     int64   `json:"n"`
	Sum   float64 `json:"sum"`
	SumSq float64 `json:"sumSq"`
}

type refCfg struct {
	ShareB    float64 `json:"shareB"`
	Alpha     float64 `json:"alpha"`
	MinEffect float64 `json:"minEffect"`
	Direction string  `json:"direction"`
	Tau2      float64 `json:"tau2"`
}

type refSummary struct{ Mean, StdErr, Low, High float64 }

type refEst struct{ Value, Low, High float64 }

func loadReference(t *testing.T) reference {
	t.Helper()
	b, err := os.ReadFile("testdata/reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatalf("testdata/reference.json: %v", err)
	}
	if len(ref.Experiments) == 0 || len(ref.Quality) == 0 {
		t.Fatal("testdata/reference.json: no cases: run scripts/make_abstat_fixture.py")
	}
	return ref
}

// near fails unless got is within a relative 1e-9 (or absolute 1e-12) of want.
func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.IsNaN(got) || math.Abs(got-want) > 1e-12+1e-9*math.Abs(want) {
		t.Errorf("%s = %.15g, scipy says %.15g", what, got, want)
	}
}

func TestEvaluateAgainstScipy(t *testing.T) {
	ref := loadReference(t)
	near(t, "z95", z95, ref.Z975)
	for _, c := range ref.Experiments {
		t.Run(c.Name, func(t *testing.T) {
			a := Arm{Units: c.RawA.Units, N: c.RawA.N, Sum: c.RawA.Sum, SumSq: c.RawA.SumSq}
			b := Arm{Units: c.RawB.Units, N: c.RawB.N, Sum: c.RawB.Sum, SumSq: c.RawB.SumSq}
			cfg := Config{ShareB: c.Config.ShareB, Alpha: c.Config.Alpha, MinEffect: c.Config.MinEffect, Direction: c.Config.Direction, Tau2: c.Config.Tau2}
			r := Evaluate(a, b, cfg, c.PrevP)
			w := c.Want
			if r.Binary != c.Binary {
				t.Errorf("Binary = %v, want %v", r.Binary, c.Binary)
			}
			for _, arm := range []struct {
				name string
				got  ArmSummary
				want refSummary
			}{{"A", r.A, w.A}, {"B", r.B, w.B}} {
				near(t, arm.name+".Mean", arm.got.Mean, arm.want.Mean)
				near(t, arm.name+".StdErr", arm.got.StdErr, arm.want.StdErr)
				near(t, arm.name+".Low", arm.got.Low, arm.want.Low)
				near(t, arm.name+".High", arm.got.High, arm.want.High)
			}
			near(t, "Lift", r.Lift, w.Lift)
			near(t, "LiftLow", r.LiftLow, w.LiftLow)
			near(t, "LiftHigh", r.LiftHigh, w.LiftHigh)
			near(t, "RelLift", r.RelLift, w.RelLift)
			near(t, "RelLow", r.RelLow, w.RelLow)
			near(t, "RelHigh", r.RelHigh, w.RelHigh)
			near(t, "SeqLow", r.SeqLow, w.SeqLow)
			near(t, "SeqHigh", r.SeqHigh, w.SeqHigh)
			near(t, "SeqRelLow", r.SeqRelLow, w.SeqRelLow)
			near(t, "SeqRelHigh", r.SeqRelHigh, w.SeqRelHigh)
			near(t, "Tau2", r.Tau2, w.Tau2)
			near(t, "PValue", r.PValue, w.PValue)
			// The chi-square tail: scipy's number, gonum's chi-square
			// and the 2·(1 − Φ(√χ²)) identity Evaluate uses agree.
			if w.SRMPValue > 1e-300 {
				near(t, "SRMPValue", r.SRMPValue, w.SRMPValue)
			} else if r.SRMPValue > 1e-300 {
				t.Errorf("SRMPValue = %g, scipy says %g", r.SRMPValue, w.SRMPValue)
			}
			chi2 := chi2Of(a.Units, b.Units, r.ShareB)
			if g := (distuv.ChiSquared{K: 1}).Survival(chi2); w.SRMPValue > 1e-300 && math.Abs(g-w.SRMPValue) > 1e-9*w.SRMPValue+1e-15 {
				t.Errorf("gonum ChiSquared{K: 1}.Survival(%g) = %g, scipy says %g", chi2, g, w.SRMPValue)
			}
			near(t, "welchP (the simulation's fixed-horizon test)", welchP(a, b), w.WelchPValue)
			if r.Significant != w.Significant || r.SRM != w.SRM || r.Decision != w.Decision {
				t.Errorf("Significant %v SRM %v Decision %q, want %v %v %q", r.Significant, r.SRM, r.Decision, w.Significant, w.SRM, w.Decision)
			}
			if !r.LiftDefined || !r.RelDefined {
				t.Errorf("LiftDefined %v RelDefined %v, want both (notes %q)", r.LiftDefined, r.RelDefined, r.Notes)
			}
		})
	}
}

func chi2Of(ua, ub int64, share float64) float64 {
	u := float64(ua + ub)
	ea, eb := (1-share)*u, share*u
	return (float64(ua)-ea)*(float64(ua)-ea)/ea + (float64(ub)-eb)*(float64(ub)-eb)/eb
}

func TestQualityAgainstScipy(t *testing.T) {
	ref := loadReference(t)
	for _, q := range ref.Quality {
		t.Run(q.Name, func(t *testing.T) {
			ps := make([]Pair, len(q.Pred))
			for i := range ps {
				ps[i] = Pair{Pred: q.Pred[i], Label: q.Label[i]}
			}
			for _, m := range []struct {
				name string
				fn   func([]Pair) (Estimate, error)
				want *refEst
			}{{"LogLoss", LogLoss, q.LogLoss}, {"AUC", AUC, q.AUC}, {"MAE", MAE, q.MAE}, {"RMSE", RMSE, q.RMSE}} {
				if m.want == nil {
					continue
				}
				got, err := m.fn(ps)
				if err != nil {
					t.Fatalf("%s: %v", m.name, err)
				}
				if got.N != len(ps) {
					t.Errorf("%s.N = %d, want %d", m.name, got.N, len(ps))
				}
				near(t, m.name+".Value", got.Value, m.want.Value)
				near(t, m.name+".Low", got.Low, m.want.Low)
				near(t, m.name+".High", got.High, m.want.High)
			}
		})
	}
}
