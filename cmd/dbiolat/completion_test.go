package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// shell is the path of a shell the completion test drives: a missing one
// skips on a developer's machine and fails under CI (scripts/install-deps
// installs them).
func shell(t *testing.T, name, needs string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil && needs != "" {
		_, err = os.Stat(needs)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is needed: %v (scripts/install-deps installs it)", name, err)
		}
		t.Skipf("%s is not installed: %v", name, err)
	}
	return path
}

// completionPath is a PATH whose dbiolat is the binary under test: the
// scripts run "dbiolat __complete …" to get their candidates.
func completionPath(t *testing.T) string {
	dir := t.TempDir()
	if err := os.Symlink(binary, filepath.Join(dir, "dbiolat")); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// bashCompletionLib is the bash-completion package's library, which
// cobra's bash script builds on (as every packaged completion does).
const bashCompletionLib = "/usr/share/bash-completion/bash_completion"

// In bash, with the script "dbiolat completion bash" prints loaded as a
// user loads it, pressing TAB completes the commands, a command's flags,
// and a file for an option that takes one.
func TestCompletionBash(t *testing.T) {
	bash := shell(t, "bash", bashCompletionLib)
	// complete LINE: what TAB at the end of LINE offers, one per line.
	script := `source ` + bashCompletionLib + `
source <(dbiolat completion bash) || exit 1
complete() {
	COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}
	read -ra COMP_WORDS <<<"$COMP_LINE"
	[[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
	__start_dbiolat dbiolat "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}" 2>/dev/null
	printf '%s\n' "${COMPREPLY[@]}"
}
complete "$LINE"
`
	complete := func(line string) []string {
		t.Helper()
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+completionPath(t), "LINE="+line)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.Fields(string(out))
	}
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	if got := complete("dbiolat "); !isSubset(names, got) || !slices.Contains(got, "completion") || !slices.Contains(got, "help") {
		t.Errorf("dbiolat <TAB> offers %q, want every command", got)
	}
	if got := complete("dbiolat sl"); !slices.Equal(got, []string{"slowlog"}) {
		t.Errorf("dbiolat sl<TAB> offers %q, want slowlog", got)
	}
	var slowlogFlags []string
	flagsOf(commands[slices.IndexFunc(commands, func(c command) bool { return c.name == "slowlog" })]).VisitAll(func(f *pflag.Flag) {
		slowlogFlags = append(slowlogFlags, "--"+f.Name)
	})
	got := complete("dbiolat slowlog --")
	slices.Sort(got)
	slices.Sort(slowlogFlags)
	if !slices.Equal(got, slowlogFlags) {
		t.Errorf("dbiolat slowlog --<TAB> offers %q, want its flags %q", got, slowlogFlags)
	}
	if got := complete("dbiolat slowlog --min-"); !slices.Equal(got, []string{"--min-io", "--min-query"}) {
		t.Errorf("dbiolat slowlog --min-<TAB> offers %q", got)
	}
	if got := complete("dbiolat completion "); !slices.Equal(got, shells) {
		t.Errorf("dbiolat completion <TAB> offers %q, want %q", got, shells)
	}
}

func isSubset(want, got []string) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}

// Where a recording file goes, the shell completes file names: cobra's
// scripts do that themselves when dbiolat answers "default" (directive 0);
// elsewhere nothing (4), directories (16) or the values a flag takes.
// Asked as the scripts ask.
func TestCompletionOffersFilesWhereTheyGo(t *testing.T) {
	for _, tc := range []struct {
		line      []string
		directive string
	}{
		{[]string{"report", ""}, ":0"},
		{[]string{"compare", "a.dbiolat", ""}, ":0"},
		{[]string{"record", "-o", ""}, ":0"},
		{[]string{"record", "--output", ""}, ":0"},
		{[]string{"report", "r.dbiolat", "--html", ""}, ":0"},
		{[]string{"slowlog", "--pgdata", ""}, ":16"},
		{[]string{"bench", "--dir", ""}, ":16"},
		{[]string{"slowlog", ""}, ":4"},
		{[]string{"slowlog", "--pid", ""}, ":4"},
		{[]string{"iops", ""}, ":4"},
		{[]string{"top", "--sort", ""}, "total"},
		{[]string{"demo", "--engine", ""}, "mariadb"},
	} {
		out, err := exec.Command(binary, append([]string{"__complete"}, tc.line...)...).Output()
		if err != nil {
			t.Fatalf("%q: %v", tc.line, err)
		}
		lines := strings.Fields(string(out))
		if !strings.HasPrefix(tc.directive, ":") { // a value offered
			if !slices.Contains(lines, tc.directive) || lines[len(lines)-1] != ":4" {
				t.Errorf("dbiolat %s<TAB>: %q, want %s offered and no files", strings.Join(tc.line, " "), out, tc.directive)
			}
			continue
		}
		if len(lines) == 0 || lines[len(lines)-1] != tc.directive {
			t.Errorf("dbiolat %s<TAB>: %q, want directive %s", strings.Join(tc.line, " "), out, tc.directive)
		}
	}
}

// In fish, "complete -C" asks the loaded script exactly what TAB offers.
func TestCompletionFish(t *testing.T) {
	fish := shell(t, "fish", "")
	cmd := exec.Command(fish, "--no-config", "-c", `dbiolat completion fish | source; or exit 1
complete -C "dbiolat sl"; echo ---; complete -C "dbiolat slowlog --min-"`)
	cmd.Env = append(os.Environ(), "PATH="+completionPath(t), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fish: %v\n%s", err, out)
	}
	before, after, _ := strings.Cut(string(out), "---\n")
	// fish prints "candidate<TAB>description".
	if !strings.HasPrefix(before, "slowlog\t") || strings.Count(before, "\n") != 1 {
		t.Errorf("dbiolat sl<TAB> offers %q, want slowlog alone", before)
	}
	if !strings.HasPrefix(after, "--min-io\t") || !strings.Contains(after, "\n--min-query\t") || strings.Count(after, "\n") != 2 {
		t.Errorf("dbiolat slowlog --min-<TAB> offers %q", after)
	}
}

// In zsh the script loads under compinit without an error and registers
// its completion function for dbiolat.
func TestCompletionZsh(t *testing.T) {
	zsh := shell(t, "zsh", "")
	cmd := exec.Command(zsh, "-f", "-c", `autoload -U compinit && compinit -u -D || exit 1
source <(dbiolat completion zsh) || exit 1
print -r -- "${+functions[_dbiolat]} ${_comps[dbiolat]}"`)
	cmd.Env = append(os.Environ(), "PATH="+completionPath(t), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "1 _dbiolat\n" {
		t.Errorf("zsh: %v, printed %q; want the function _dbiolat registered for dbiolat, and nothing else", err, out)
	}
}
