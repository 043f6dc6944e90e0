package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"golang.org/x/sys/unix"

	"github.com/dbiolat/dbiolat/internal/output"
)

// versionInfo is what "dbiolat version" reports: enough to tell which
// build ran on which kernel in a bug report.
type versionInfo struct {
	Version  string `json:"version"`            // the module's version, or "devel"
	Revision string `json:"revision,omitempty"` // the commit built, when the build recorded it
	Time     string `json:"time,omitempty"`     // the commit's time
	Modified bool   `json:"modified,omitempty"` // built from a work tree with changes
	Go       string `json:"go"`
	Platform string `json:"platform"` // GOOS/GOARCH
	Kernel   string `json:"kernel"`   // uname -r
}

func runVersionCmd(ctx context.Context, args []string) error {
	fs := newFlagSet("version")
	asJSON := fs.Bool("json", false, "print the version as one JSON object")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q: version takes only options", pos[0])
	}
	bi, _ := debug.ReadBuildInfo()
	v := buildVersion(bi, kernelRelease())
	if *asJSON {
		return output.NewJSON(stdout).Write(v)
	}
	fmt.Fprintf(stdout, "dbiolat %s\n", v.Version)
	if v.Revision != "" {
		modified := ""
		if v.Modified {
			modified = ", modified"
		}
		fmt.Fprintf(stdout, "revision %s (%s%s)\n", v.Revision, v.Time, modified)
	}
	fmt.Fprintf(stdout, "built with %s for %s\nkernel %s\n", v.Go, v.Platform, v.Kernel)
	return nil
}

// buildVersion reads the version the Go toolchain stamped into the
// binary (bi: nil if it stamped none): a tagged module version when
// installed with "go install …@v1.2.3", the commit when built in a git
// checkout (unless -buildvcs=false), "devel" otherwise.
func buildVersion(bi *debug.BuildInfo, kernel string) versionInfo {
	v := versionInfo{Version: "devel", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, Kernel: kernel}
	if bi == nil {
		return v
	}
	if mv := bi.Main.Version; mv != "" && mv != "(devel)" {
		v.Version = mv
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// kernelRelease is uname -r: "6.18.0-1-amd64".
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}
