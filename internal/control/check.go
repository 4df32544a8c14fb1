package control

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/sluiceml/sluice/internal/hosting"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/runtime"
)

// PackageCheck is what CheckPackage found in a package.
type PackageCheck struct {
	// Model is the package's model, loaded (nil when the load failed).
	// Close releases it.
	Model runtime.Model
	// Detail is the runtime's description of the loaded model.
	Detail string
	// Ordered says the artifact names its input columns and the schema's
	// columns are those, in order (hosting.CheckFieldOrder).
	Ordered bool
	// Warnings are what passed but should be fixed: an artifact that
	// could name its columns and does not (hosting.FieldOrderWarning).
	Warnings []string
	// ReferenceRows is the number of drift reference rows (0 without drift:).
	ReferenceRows int
	// Golden holds every golden example's compared outputs (nil when the
	// package declares none, or the golden examples were not compared).
	Golden []hosting.GoldenResult
}

// Close releases the loaded model.
func (pc *PackageCheck) Close() {
	if pc != nil && pc.Model != nil {
		_ = pc.Model.Close()
		pc.Model = nil
	}
}

// CheckOptions change what CheckPackage runs.
type CheckOptions struct {
	// SkipGolden loads the model but compares no golden example (`sluice
	// check --update-golden` rewrites them instead).
	SkipGolden bool
}

// CheckPackage runs every check a package passes before it may become a
// version: the one set `sluice check`, `sluice push` (before the upload)
// and the server's upload (before the version is stored) all run. In
// order: the artifact loads in its runtime and its shape matches the
// schema; the drift reference, if any, reads and preprocesses; every
// golden example's output is within its tolerance. The first check that
// fails ends it with an error naming what failed; the returned
// PackageCheck (never nil) holds what ran until then, so a caller can
// print it. A check added here is a check of all three.
func CheckPackage(ctx context.Context, p *modelpkg.Package, opts CheckOptions) (*PackageCheck, error) {
	pc := &PackageCheck{}
	name := p.Spec.Manifest.Name
	p, err := inMemory(p)
	if err != nil {
		return pc, fmt.Errorf("check %s: %w", name, err)
	}
	m, err := hosting.LoadPackage(ctx, p)
	if err != nil {
		return pc, fmt.Errorf("load %s: %w", name, err)
	}
	pc.Model = m
	pc.Detail = m.Info().Detail
	pc.Ordered = len(m.Info().FeatureNames) > 0
	if w := hosting.FieldOrderWarning(p.Spec, m.Info()); w != "" {
		pc.Warnings = append(pc.Warnings, w)
	}
	if p.Spec.Manifest.Drift != nil {
		rows, err := ReferenceRows(p.Spec, p.Reference)
		if err != nil {
			return pc, fmt.Errorf("drift reference of %s: %w", name, err)
		}
		pc.ReferenceRows = len(rows)
	}
	if opts.SkipGolden {
		return pc, nil
	}
	res, err := hosting.CompareGolden(ctx, p.Spec, m)
	if err != nil {
		return pc, fmt.Errorf("golden examples of %s: %w", name, err)
	}
	pc.Golden = res
	var bad []string
	for _, r := range res {
		if !r.OK {
			bad = append(bad, fmt.Sprintf("golden example %d: %s = %s, expected %s (tolerance %s)", r.Example, r.Output,
				r.GotText(), r.WantText(), FormatNumber(r.Tolerance)))
		}
	}
	if len(bad) > 0 {
		return pc, fmt.Errorf("%s: %d golden check(s) failed: %s (if the artifact is right, `sluice check --update-golden DIR` rewrites the expected values)",
			name, len(bad), strings.Join(bad, "; "))
	}
	return pc, nil
}

// inMemory returns p with its artifact and drift reference in memory: an
// upload keeps them in temporary files (their size is bounded by the
// upload's limit), and the runtime loads from bytes.
func inMemory(p *modelpkg.Package) (*modelpkg.Package, error) {
	if len(p.Artifact) == int(p.ArtifactSize()) && len(p.Reference) == int(p.ReferenceSize()) {
		return p, nil
	}
	q := *p
	var err error
	if q.Artifact, err = readAll(p.OpenArtifact, p.ArtifactSize()); err != nil {
		return nil, fmt.Errorf("read the artifact: %w", err)
	}
	if q.Reference, err = readAll(p.OpenReference, p.ReferenceSize()); err != nil {
		return nil, fmt.Errorf("read the drift reference: %w", err)
	}
	return &q, nil
}

func readAll(open func() (io.ReadCloser, error), size int64) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	r, err := open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// FormatSig prints x rounded to n significant digits in plain decimal
// digits (109.2, 0.001235, 12350), never with an exponent as %.4g would
// (1.235e+04): for measured figures in messages and CLI output.
func FormatSig(x float64, n int) string {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'e', n-1, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// FormatNumber prints x in plain decimal digits, as few as tell it apart
// (109, 0.25, 1234567.5), never with an exponent.
func FormatNumber(x float64) string {
	return strconv.FormatFloat(x, 'f', -1, 64)
}
