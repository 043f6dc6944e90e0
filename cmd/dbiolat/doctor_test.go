package main

// doctor: every check of a machine that can trace passes, and it names
// what the instance's binary carries.

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

func TestDoctorChecksEverything(t *testing.T) {
	c := startPG(t, nil)
	out, err := exec.Command(binary, "doctor", "--json", "--pid", fmt.Sprint(c.PostmasterPID())).CombinedOutput()
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	var report struct {
		Checks []doctorCheck
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	var names []string
	for _, ch := range report.Checks {
		names = append(names, ch.Check)
		if !ch.OK {
			t.Errorf("check %q failed: %s", ch.Check, ch.Error)
		}
		if strings.HasPrefix(ch.Check, "USDT probes") && !strings.Contains(ch.Info, "query__start 1,") {
			t.Errorf("the USDT check does not count the query probes: %q", ch.Info)
		}
	}
	if st := doctorStorage(t, c.PostmasterPID()); !strings.Contains(st, "mounted at /") {
		t.Errorf("doctor does not say what the data directory is on: %q", st)
	}
	for _, want := range []string{"privileges", "kernel BTF", "tracefs", "load and attach", "find PostgreSQL", "USDT probes", "storage under"} {
		if !strings.Contains(strings.Join(names, "\n"), want) {
			t.Errorf("no %q check among %q", want, names)
		}
	}
	text, err := exec.Command(binary, "doctor", "--pid", fmt.Sprint(c.PostmasterPID())).CombinedOutput()
	if err != nil || !strings.Contains(string(text), "all checks passed") {
		t.Errorf("doctor: %v\n%s", err, text)
	}
}

// doctorStorage returns what doctor says lies under the data directory of
// the server process pid belongs to.
func doctorStorage(t *testing.T, pid int) string {
	t.Helper()
	out, err := exec.Command(binary, "doctor", "--json", "--pid", fmt.Sprint(pid)).CombinedOutput()
	var report struct{ Checks []doctorCheck }
	if err != nil || json.Unmarshal(out, &report) != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	for _, ch := range report.Checks {
		if strings.HasPrefix(ch.Check, "storage under the data directory") {
			return ch.Info
		}
	}
	t.Fatalf("doctor has no storage check:\n%s", out)
	return ""
}

// On PostgreSQL 18 and 19 doctor says the reads I/O workers perform are
// charged to the query, in the version's own settings (19 renamed
// io_workers to a range).
func TestDoctorNamesIOWorkers(t *testing.T) {
	for _, v := range []struct{ version, setting string }{{"18", "io_workers"}, {"19", "io_min_workers and io_max_workers"}} {
		t.Run("pg"+v.version, func(t *testing.T) {
			c := startVersion(t, v.version, nil)
			// Its exit status is not this test's (npm's builds carry no USDT probes): it says every check.
			out, _ := exec.Command(binary, "doctor", "--json", "--pid", fmt.Sprint(c.PostmasterPID())).Output()
			var report struct{ Checks []doctorCheck }
			if err := json.Unmarshal(out, &report); err != nil {
				t.Fatalf("doctor --json: %v\n%s", err, out)
			}
			for _, ch := range report.Checks {
				if strings.HasPrefix(ch.Check, "asynchronous I/O") {
					t.Logf("%s: %s", ch.Check, ch.Info)
					if !ch.OK || !strings.Contains(ch.Info, v.setting) || !strings.Contains(ch.Info, "charged to the query") {
						t.Errorf("%s: ok %v, %q %s, want it to name %s", ch.Check, ch.OK, ch.Info, ch.Error, v.setting)
					}
					return
				}
			}
			t.Errorf("doctor has no asynchronous I/O check:\n%s", out)
		})
	}
}
