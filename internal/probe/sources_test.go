package probe

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Each BPF source includes what it uses: it compiles on its own, not only
// in the order dbiolat.bpf.c includes it. (bpf2go compiles the whole.)
func TestSourcesCompileAlone(t *testing.T) {
	clang, err := exec.LookPath("clang")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("clang is not installed (make deps installs it)")
		}
		t.Skip("clang is not installed")
	}
	sources, err := filepath.Glob("bpf/*.bpf.c")
	if err != nil || len(sources) < 2 {
		t.Fatalf("sources %v: %v", sources, err)
	}
	for _, src := range sources {
		if filepath.Base(src) == "dbiolat.bpf.c" {
			continue
		}
		// The flags of gen.go, as bpf2go passes them for -target amd64.
		out, err := exec.Command(clang, "-target", "bpfel", "-D__TARGET_ARCH_x86", "-O2", "-g", "-Wall", "-Werror", "-mcpu=v3",
			"-Ibpf", "-c", "-o", os.DevNull, src).CombinedOutput()
		if err != nil {
			t.Errorf("%s does not compile on its own: %v\n%s", src, err, out)
		}
	}
}
