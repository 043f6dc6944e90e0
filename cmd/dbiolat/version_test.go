package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// The version's parts come from the build info the toolchain stamps:
// a tagged version wins over "devel", the commit and its state are shown.
func TestVersionFromBuildInfo(t *testing.T) {
	cases := []struct {
		name string
		bi   *debug.BuildInfo
		want versionInfo
	}{
		{"no build info", nil, versionInfo{Version: "devel"}},
		{"go build in a checkout without vcs", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, versionInfo{Version: "devel"}},
		{"go install of a tag", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, versionInfo{Version: "v1.2.3"}},
		{"a commit with changes", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261126101500-0f645e2a1b2c+dirty"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0f645e2a1b2c"}, {Key: "vcs.time", Value: "2026-11-26T10:15:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			versionInfo{Version: "v0.0.0-20261126101500-0f645e2a1b2c+dirty", Revision: "0f645e2a1b2c", Time: "2026-11-26T10:15:00Z", Modified: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := buildVersion(tc.bi, "6.18.0")
			tc.want.Go, tc.want.Platform, tc.want.Kernel = runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH, "6.18.0"
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// "dbiolat version" reports what the toolchain recorded in the binary
// (go version -m reads the same record independently), the Go it was
// built with and the kernel it runs on (/proc/sys/kernel/osrelease).
// Built with -buildvcs=true: in a git checkout the commit is recorded (not
// in a git worktree, whose .git is a file: then both sides say none).
func TestVersionReportsBuildAndKernel(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "dbiolat")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildvcs=true: %v\n%s", err, out)
	}
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "build" {
			k, v, _ := strings.Cut(f[1], "=")
			recorded[k] = v
		}
	}
	out, err = exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v versionInfo
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	osrelease, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(string(osrelease)); v.Kernel != want {
		t.Errorf("kernel %q, want %q", v.Kernel, want)
	}
	if v.Go != runtime.Version() {
		t.Errorf("go %q, want %q (the test's toolchain built it)", v.Go, runtime.Version())
	}
	if v.Revision != recorded["vcs.revision"] || v.Time != recorded["vcs.time"] || v.Modified != (recorded["vcs.modified"] == "true") {
		t.Errorf("revision %q time %q modified %v, the binary records %q %q %q", v.Revision, v.Time, v.Modified,
			recorded["vcs.revision"], recorded["vcs.time"], recorded["vcs.modified"])
	}
	if v.Revision == "" && v.Version != "devel" {
		t.Errorf("version %q without a commit or a tag, want devel", v.Version)
	}
	t.Logf("recorded commit %q", v.Revision)

	// The text form says the same, one fact a line.
	text, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dbiolat " + v.Version + "\n", v.Go, v.Kernel, v.Revision} {
		if !strings.Contains(string(text), want) {
			t.Errorf("version says\n%s\nwithout %q", text, want)
		}
	}
}
