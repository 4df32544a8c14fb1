package kubetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The image tarball's entrypoint is the sluice binary and runs.
func TestExtractEntrypoint(t *testing.T) {
	img := os.Getenv("SLUICE_IMAGE_TAR")
	if img == "" {
		t.Skip("SLUICE_IMAGE_TAR is not set: make image builds the tarball (scripts/build-image.sh)")
	}
	dst := filepath.Join(t.TempDir(), "sluice")
	tags, err := ExtractEntrypoint(img, dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 1 || !strings.Contains(tags[0], "sluice:") {
		t.Errorf("tags %v", tags)
	}
	out, err := exec.Command(dst, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "sluice") {
		t.Errorf("sluice version: %v %s", err, out)
	}
}
