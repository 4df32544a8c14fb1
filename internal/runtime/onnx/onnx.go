// Package onnx is the "onnx" runtime: ONNX models run by ONNX Runtime's C API
// (through github.com/yalue/onnxruntime_go, so it needs cgo and ONNX
// Runtime's shared library at run time; docs/onnx.md).
//
// The tensor contract is the tabular one: the model has one input, a float32
// tensor [batch, d] with a dynamic batch dimension and d equal to the number
// of features the package's schema produces after preprocessing, filled with
// the batch's rows in order (NaN for a missing value is passed as is), and
// one output, a float32 tensor [batch, k] with k the number of output fields,
// or [batch] when k is 1. Load checks all of that and names the tensor at
// fault.
//
// A model whose one input is int64 [batch, seq] (both axes dynamic) is a
// sequence model instead: its package's schema is one sequence field, its
// batches carry rows of token ids (runtime.Batch.Tokens), and each batch is
// padded to its longest row with the pad value (model.yaml
// serving.padValue) into one [n, L] tensor.
//
// The shared library is found, in order, from SetLibraryPath (the serve
// command's --onnxruntime-lib flag), the SLUICE_ONNXRUNTIME_LIB environment
// variable, then standard locations: the cache folder that
// scripts/fetch-onnxruntime.sh fills, LD_LIBRARY_PATH, /usr/local/lib and the
// system library folders. ONNX Runtime's environment is process-global: it is
// created once, by the first model that loads, and never destroyed.
//
// A build without cgo still registers the runtime; loading a model then fails
// with "onnx runtime not available in this build".
package onnx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sluiceml/sluice/internal/runtime"
)

// ORTVersion is the ONNX Runtime release scripts/fetch-onnxruntime.sh pins
// and whose cache folder the runtime searches.
const ORTVersion = "1.30.0"

// EnvLibrary names the environment variable holding the library's path.
const EnvLibrary = "SLUICE_ONNXRUNTIME_LIB"

// Default thread counts when model.yaml's onnx: section leaves them at 0.
const (
	DefaultIntraOpThreads = 1
	DefaultInterOpThreads = 1
)

func init() { runtime.Register("onnx", Runtime{}) }

// Runtime loads ONNX models.
type Runtime struct{}

// FeatureNamesHelp says where an ONNX model names its input columns (the
// metadata property feature_names) and how to add them.
func (Runtime) FeatureNamesHelp() runtime.FeatureNamesHelp {
	return runtime.FeatureNamesHelp{
		Where: "ONNX metadata property feature_names",
		Add:   `onnx.helper.set_model_props(model, {"feature_names": json.dumps(list(X.columns))}) with the training columns in order, then onnx.save(model, path)`,
	}
}

var (
	libMu       sync.Mutex
	libExplicit string // from SetLibraryPath
)

// SetLibraryPath sets the path of ONNX Runtime's shared library
// (libonnxruntime.so.1), overriding SLUICE_ONNXRUNTIME_LIB and the standard
// locations. The serve command's --onnxruntime-lib flag calls it. It takes
// effect if called before the first ONNX model loads: the library is loaded
// once per process.
func SetLibraryPath(p string) {
	libMu.Lock()
	defer libMu.Unlock()
	libExplicit = p
}

func libraryPathSetting() string {
	libMu.Lock()
	defer libMu.Unlock()
	return libExplicit
}

// CacheDir is the folder scripts/fetch-onnxruntime.sh puts the library in:
// $SLUICE_ONNXRUNTIME_CACHE or ${XDG_CACHE_HOME:-$HOME/.cache}/sluice/onnxruntime,
// then /<ORTVersion>. It is "" when neither HOME nor XDG_CACHE_HOME is set.
func CacheDir() string {
	base := os.Getenv("SLUICE_ONNXRUNTIME_CACHE")
	if base == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home := os.Getenv("HOME")
			if home == "" {
				return ""
			}
			cache = filepath.Join(home, ".cache")
		}
		base = filepath.Join(cache, "sluice", "onnxruntime")
	}
	return filepath.Join(base, ORTVersion)
}

// StandardLocations lists where the library is looked for when neither
// SetLibraryPath nor SLUICE_ONNXRUNTIME_LIB names it, in order.
func StandardLocations() []string {
	var dirs []string
	if c := CacheDir(); c != "" {
		dirs = append(dirs, c)
	}
	for _, d := range filepath.SplitList(os.Getenv("LD_LIBRARY_PATH")) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	dirs = append(dirs, "/usr/local/lib", "/usr/local/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")
	var out []string
	for _, d := range dirs {
		out = append(out, filepath.Join(d, "libonnxruntime.so.1"), filepath.Join(d, "libonnxruntime.so"))
	}
	return out
}

// errNoLibrary is wrapped by every "library not found / not loadable" error.
var errNoLibrary = errors.New("ONNX Runtime's shared library is not available")

// libraryHint says how to provide the library; every library error ends
// with it.
func libraryHint() string {
	where := "its cache folder"
	if c := CacheDir(); c != "" {
		where = c
	}
	return fmt.Sprintf("serve with --onnxruntime-lib PATH or set %s=PATH to libonnxruntime.so.1 (ONNX Runtime %s for linux/x86_64); "+
		"`bash scripts/fetch-onnxruntime.sh` downloads it to %s, where Sluice finds it without either", EnvLibrary, ORTVersion, where)
}

// resolveLibrary picks the library path: explicit, then env, then the first
// standard location that exists. source says which, for messages.
func resolveLibrary(explicit, env string, standard []string, exists func(string) bool) (path, source string, err error) {
	switch {
	case explicit != "":
		return explicit, "--onnxruntime-lib", nil
	case env != "":
		return env, EnvLibrary, nil
	}
	for _, p := range standard {
		if exists(p) {
			return p, "standard location", nil
		}
	}
	return "", "", fmt.Errorf("onnx: %w: not found (%s is not set; looked in %s); %s",
		errNoLibrary, EnvLibrary, shortList(standard), libraryHint())
}

func shortList(paths []string) string {
	dirs := []string{}
	seen := map[string]bool{}
	for _, p := range paths {
		d := filepath.Dir(p)
		if !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	return strings.Join(dirs, ", ")
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// sessionThreads applies the defaults to model.yaml's onnx: section.
func sessionThreads(o runtime.SessionOptions) (intra, inter int) {
	intra, inter = o.IntraOpThreads, o.InterOpThreads
	if intra <= 0 {
		intra = DefaultIntraOpThreads
	}
	if inter <= 0 {
		inter = DefaultInterOpThreads
	}
	return intra, inter
}
