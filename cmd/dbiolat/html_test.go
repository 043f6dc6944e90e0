package main

// The HTML outputs of a real recording, opened in headless Chromium: no
// console message, the plots drawn (their colors found in a screenshot),
// the DOM holding every plot and table row, nothing fetched.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/htmlreport"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/record"
)

// needChromium returns the browser, or skips when it is missing, unless
// CI says the test must run.
func needChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed, and CI must run this test (scripts/install-deps installs it)")
	}
	t.Skip("needs chromium")
	return ""
}

// consoleLine is a message of the page's console in Chromium's log
// ("[...:INFO:CONSOLE:2] "msg", source: ..." or, in older versions,
// "INFO:CONSOLE(2)"): the rest of what it logs (D-Bus, GPU) is noise.
var consoleLine = regexp.MustCompile(`:CONSOLE[:(]|Uncaught`)

// chromium opens a file headless and returns what it printed and the
// console lines of its log.
func chromium(t *testing.T, browser, file string, mode ...string) (stdout string, console []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--no-first-run", "--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0"},
		mode...)
	cmd := exec.CommandContext(ctx, browser, append(args, "file://"+file)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", mode, err, errOut.String())
	}
	for _, line := range strings.Split(errOut.String(), "\n") {
		if consoleLine.MatchString(line) {
			console = append(console, line)
		}
	}
	return out.String(), console
}

// screenshot renders a page to PNG and counts the pixels of each color.
func screenshot(t *testing.T, browser, file string, colors ...string) map[string]int {
	t.Helper()
	shot := filepath.Join(t.TempDir(), "shot.png")
	_, console := chromium(t, browser, file, "--window-size=1400,9000", "--hide-scrollbars", "--screenshot="+shot)
	if len(console) > 0 {
		t.Errorf("console messages opening %s:\n%s", filepath.Base(file), strings.Join(console, "\n"))
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	return countColors(img, colors)
}

func countColors(img image.Image, colors []string) map[string]int {
	want := map[[3]uint8]string{}
	for _, c := range colors {
		v, _ := strconv.ParseUint(strings.TrimPrefix(c, "#"), 16, 32)
		want[[3]uint8{uint8(v >> 16), uint8(v >> 8), uint8(v)}] = c
	}
	n := map[string]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if c, ok := want[[3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}]; ok {
				n[c]++
			}
		}
	}
	return n
}

var (
	plotAttr = regexp.MustCompile(`<svg class="plot" data-plot="([^"]+)"`)
	// Anything a browser would fetch or run.
	fetches = regexp.MustCompile(`(?i)(src|href|xlink:href|action)\s*=\s*["']?\s*[a-z]*:?//|url\(|@import|<script|<link|<img|<iframe`)
)

// rows returns the table rows of a class in a DOM.
func rows(dom, class string) []string {
	var out []string
	for _, part := range strings.Split(dom, `<tr class="`+class+`"`)[1:] {
		row, _, _ := strings.Cut(part, "</tr>")
		out = append(out, row)
	}
	return out
}

// checkPage checks a written HTML file and the DOM Chromium made of it:
// mode 0600, nothing to fetch, no console message, the plots expected.
func checkPage(t *testing.T, browser, file string, plots []string) (dom string) {
	t.Helper()
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600: query texts are private", file, st.Mode().Perm())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if m := fetches.FindString(string(b)); m != "" {
		t.Errorf("%s refers to something to fetch or run: %q", file, m)
	}
	dom, console := chromium(t, browser, file, "--dump-dom")
	if len(console) > 0 {
		t.Errorf("console messages loading %s:\n%s", filepath.Base(file), strings.Join(console, "\n"))
	}
	var got []string
	for _, m := range plotAttr.FindAllStringSubmatch(dom, -1) {
		got = append(got, m[1])
	}
	if !slices.Equal(got, plots) {
		t.Errorf("plots in the DOM of %s:\n got  %q\n want %q", filepath.Base(file), got, plots)
	}
	return dom
}

// recordWorkload records pgbench transactions and a cold scan (so there
// are block reads) into file, with file system calls traced if fs.
func recordWorkload(t *testing.T, c *pgsandbox.Cluster, file string, transactions int, fs bool) {
	t.Helper()
	args := []string{"record", "-o", file, "--interval", "0.5s", "--pid", fmt.Sprint(c.PostmasterPID())}
	if fs {
		args = append(args, "--fs")
	}
	tr := startTrace(t, args...)
	if _, err := c.Pgbench(context.Background(), "postgres", "-n", "-c", "2", "-t", fmt.Sprint(transactions)); err != nil {
		t.Fatal(err)
	}
	dropCaches(t)
	psql(t, c, "SELECT count(*) FROM cold WHERE id >= 0")
	time.Sleep(300 * time.Millisecond)
	tr.cmd.Process.Signal(syscall.SIGINT)
	if err := tr.cmd.Wait(); err != nil {
		t.Fatalf("record: %v: %s", err, tr.stderr.String())
	}
}

func TestHTMLReportAndCompareInChromium(t *testing.T) {
	c := startPG(t, nil)
	browser := needChromium(t)
	if _, err := c.Pgbench(context.Background(), "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	// Twice shared_buffers: a scan reads it through a ring, from the kernel.
	psql(t, c, "CREATE TABLE cold AS SELECT g AS id, repeat('c', 300) AS pad FROM generate_series(1, 100000) g; CHECKPOINT")
	dir := t.TempDir()
	a, b := filepath.Join(dir, "first.dbiolat"), filepath.Join(dir, "second.dbiolat")
	recordWorkload(t, c, a, 100, true)
	recordWorkload(t, c, b, 50, true)
	ra, rb := openRecording(t, a), openRecording(t, b)
	if ra.Summary == nil || ra.Summary.Hists["blk_read"] == nil || ra.Summary.Hists["blk_read"].Count == 0 {
		t.Fatalf("the recording has no block reads: the cold scan was not cold")
	}

	// report --html, over a file that exists with a wider mode.
	reportHTML := filepath.Join(dir, "report.html")
	if err := os.WriteFile(reportHTML, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(binary, "report", a, "--html", reportHTML).CombinedOutput(); err != nil {
		t.Fatalf("report --html: %v\n%s", err, out)
	}
	want := histPlots(ra)
	want = append(want, "rate-fs-ops", "rate-fs-bytes", "rate-blk-ops", "rate-blk-bytes", "waterfall")
	dom := checkPage(t, browser, reportHTML, want)
	checkReportCounts(t, dom, ra)
	fps := rows(dom, "fp")
	if n := len(output.ByFingerprint(ra.Queries)); len(fps) != min(10, n) {
		t.Errorf("%d fingerprint rows, want %d", len(fps), min(10, n))
	}
	if !slices.ContainsFunc(fps, func(r string) bool { return strings.Contains(r, "UPDATE pgbench_accounts") }) {
		t.Errorf("no fingerprint row for pgbench's account updates:\n%s", strings.Join(fps, "\n"))
	}
	if n := len(rows(dom, "slow")); n != 10 {
		t.Errorf("%d queries in the waterfall table, want 10", n)
	}
	for _, s := range []string{ra.Meta["kernel"], ra.Meta["device"], ra.Meta["mount_options"], "nothing dropped"} {
		if !strings.Contains(dom, s) {
			t.Errorf("the report does not say %q", s)
		}
	}
	px := screenshot(t, browser, reportHTML, htmlreport.ColorHist, htmlreport.ColorRead, model.Boxes[0].Color)
	t.Logf("report: pixels %v", px)
	for color, least := range map[string]int{htmlreport.ColorHist: 5000, htmlreport.ColorRead: 500, model.Boxes[0].Color: 2000} {
		if px[color] < least {
			t.Errorf("the report's screenshot has %d pixels of %s, want at least %d: a plot was not drawn", px[color], color, least)
		}
	}

	// A recording without --fs: its file system is said not traced, and
	// no empty plot stands for it.
	noFS := filepath.Join(dir, "nofs.dbiolat")
	recordWorkload(t, c, noFS, 20, false)
	rn := openRecording(t, noFS)
	if rn.Summary == nil || slices.Contains(rn.Summary.Traced, "fs") {
		t.Fatalf("a recording without --fs says it traced: %+v", rn.Summary)
	}
	noFSHTML := filepath.Join(dir, "nofs.html")
	if out, err := exec.Command(binary, "report", noFS, "--html", noFSHTML).CombinedOutput(); err != nil {
		t.Fatalf("report --html: %v\n%s", err, out)
	}
	want = histPlots(rn)
	want = append(want, "rate-blk-ops", "rate-blk-bytes", "waterfall")
	for _, p := range want {
		if strings.HasPrefix(p, "hist-fs_") {
			t.Errorf("a recording without --fs has a file system histogram: %s", p)
		}
	}
	dom = checkPage(t, browser, noFSHTML, want)
	checkReportCounts(t, dom, rn)
	if n := strings.Count(dom, `<p class="not-traced">File system calls were not traced (the recording was made without --fs)`); n != 2 {
		t.Errorf("the report without --fs says %d times that file system calls were not traced, want 2 (histograms, rates)", n)
	}
	for _, r := range slices.Concat(rows(dom, "slow"), rows(dom, "fp")) {
		if !strings.Contains(r, "not traced") {
			t.Errorf("without --fs, a row gives file system figures:\n%s", r)
		}
	}

	// compare: the fingerprints both have, in JSON, text and HTML.
	js, err := exec.Command(binary, "compare", "--json", a, b).Output()
	if err != nil {
		t.Fatal(err)
	}
	var cmp output.Comparison
	if err := json.Unmarshal(js, &cmp); err != nil {
		t.Fatal(err)
	}
	var updates *output.QueryDelta
	for i := range cmp.Queries {
		if strings.HasPrefix(cmp.Queries[i].Query, "UPDATE pgbench_accounts") {
			updates = &cmp.Queries[i]
		}
	}
	if cmp.Common < 5 || len(cmp.Queries) != min(10, cmp.Common) || updates == nil || updates.CallsA != 200 || updates.CallsB != 100 {
		t.Errorf("compare: %d fingerprints in both, %d listed, account updates %+v (want 200 calls, then 100)", cmp.Common, len(cmp.Queries), updates)
	}
	out, err := exec.Command(binary, "compare", "--top", "3", a, b).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "query fingerprints in both recordings; the 3 whose total time changed most") {
		t.Errorf("compare: %v\n%s", err, out)
	}
	compareHTML := filepath.Join(dir, "compare.html")
	if out, err := exec.Command(binary, "compare", "--html", compareHTML, a, b).CombinedOutput(); err != nil {
		t.Fatalf("compare --html: %v\n%s", err, out)
	}
	want = nil
	for _, def := range model.Histograms {
		ha, hb := ra.Summary.Hists[def.Name], rb.Summary.Hists[def.Name]
		if (ha != nil && ha.Count > 0) || (hb != nil && hb.Count > 0) {
			want = append(want, "cmp-"+def.Name)
		}
	}
	if len(cmp.Queries) > 0 { // the legend, then each fingerprint's bars of A and B
		want = append(want, "boxes-legend")
	}
	for _, d := range cmp.Queries {
		want = append(want, "boxes-"+d.Fingerprint)
	}
	dom = checkPage(t, browser, compareHTML, want)
	deltas := rows(dom, "delta")
	if len(deltas) != len(cmp.Queries) || !slices.ContainsFunc(deltas, func(r string) bool { return strings.Contains(r, "UPDATE pgbench_accounts") }) {
		t.Errorf("%d delta rows (want %d, one of them the account updates):\n%s", len(deltas), len(cmp.Queries), strings.Join(deltas, "\n"))
	}
	if n := len(rows(dom, "layer")); n != len(cmp.Layers) {
		t.Errorf("%d layer rows, want %d", n, len(cmp.Layers))
	}
	// Each fingerprint's row has its two bars, A's and B's, in the order of the deltas.
	bars := rows(dom, "waterfall")
	if len(bars) != len(cmp.Queries) {
		t.Errorf("%d rows of bars, want %d", len(bars), len(cmp.Queries))
	}
	for i, r := range bars[:min(len(bars), len(cmp.Queries))] {
		if fp := cmp.Queries[i].Fingerprint; !strings.Contains(r, `data-fingerprint="`+fp+`"`) ||
			strings.Count(r, `class="bar-a"`) != 1 || strings.Count(r, `class="bar-b"`) != 1 {
			t.Errorf("row %d of bars: want %s's bar of A and of B:\n%s", i, fp, r)
		}
	}
	if na, nb := strings.Count(dom, `class="bar-a"`), strings.Count(dom, `class="bar-b"`); na+nb != 2*len(cmp.Queries) {
		t.Errorf("%d bars of A and %d of B for %d fingerprints", na, nb, len(cmp.Queries))
	}
	// The recordings share fingerprints, so the verdict has a chain: its
	// steps, one row each, with their figures.
	micros := regexp.MustCompile(`([0-9])us\b`) // the page writes µs
	cell := regexp.MustCompile(`<td[^>]*>([^<]*)</td>`)
	steps := rows(dom, "step")
	if len(cmp.Chain) == 0 || len(steps) != len(cmp.Chain) {
		t.Errorf("%d chain rows for a chain of %d steps (want at least one: the recordings share %d fingerprints)", len(steps), len(cmp.Chain), cmp.Common)
	}
	for i, s := range cmp.Chain[:min(len(steps), len(cmp.Chain))] {
		a, b, change, share := s.Figures()
		a, b, change = micros.ReplaceAllString(a, "${1}µs"), micros.ReplaceAllString(b, "${1}µs"), micros.ReplaceAllString(change, "${1}µs")
		cells := cell.FindAllStringSubmatch(steps[i], -1)
		if len(cells) != 8 || cells[0][1] != s.What || cells[2][1] != a || cells[3][1] != b || cells[4][1] != change || cells[6][1] != share {
			t.Errorf("chain row %d: want %s, %s, %s, %s and share %q:\n%s", i, s.What, a, b, change, share, steps[i])
			continue
		}
		// A share is a part of the whole: a step that moved by more (others
		// moved the other way) says so in words, and the page says why.
		if p, ok := strings.CutSuffix(share, "%"); ok {
			if n, err := strconv.Atoi(p); err != nil || n > 100 || n < -100 {
				t.Errorf("chain row %d: share %q beyond the whole:\n%s", i, share, steps[i])
			}
		} else if share != "" && share != "more than all" && share != "against, more than all" {
			t.Errorf("chain row %d: share %q", i, share)
		}
	}
	t.Logf("chain: %q", steps)
	for _, m := range regexp.MustCompile(`([0-9]+)% of `).FindAllStringSubmatch(cmp.Verdict, -1) {
		if n, _ := strconv.Atoi(m[1]); n > 100 {
			t.Errorf("the verdict gives a share beyond the whole: %q", cmp.Verdict)
		}
	}
	if !strings.Contains(dom, `not a percentage above 100% but "more than all"`) {
		t.Error("the comparison does not explain its shares")
	}
	verdict := micros.ReplaceAllString(cmp.Verdict, "${1}µs")
	for _, s := range []string{"A: first.dbiolat", "B: second.dbiolat", verdict} {
		if !strings.Contains(dom, s) {
			t.Errorf("the comparison does not say %q", s)
		}
	}
	colors := []string{htmlreport.ColorA, htmlreport.ColorB}
	for _, b := range model.Boxes {
		colors = append(colors, b.Color)
	}
	px = screenshot(t, browser, compareHTML, colors...)
	t.Logf("compare: pixels %v", px)
	for _, color := range []string{htmlreport.ColorA, htmlreport.ColorB} {
		if px[color] < 3000 {
			t.Errorf("the comparison's screenshot has %d pixels of %s, want at least 3000: a histogram was not drawn", px[color], color)
		}
	}
	// Of each fingerprint's two bars the longer is 420 by 16 pixels, less
	// its outline: all of it in the boxes' colors.
	var boxPx int
	for _, b := range model.Boxes {
		boxPx += px[b.Color]
	}
	if least := 4000 * len(cmp.Queries); boxPx < least {
		t.Errorf("the comparison's screenshot has %d pixels of the boxes' colors, want at least %d: the bars of %d fingerprints were not drawn", boxPx, least, len(cmp.Queries))
	}
}

// histPlots are the histogram plots a report of r draws: the catalog's
// that have samples, then the wait events', the most time first.
func histPlots(r *record.Recording) []string {
	var want []string
	for _, def := range model.Histograms {
		if h := r.Summary.Hists[def.Name]; h != nil && h.Count > 0 {
			want = append(want, "hist-"+def.Name)
		}
	}
	for _, event := range output.ByTotal(r.Summary.WaitHists) {
		want = append(want, "wait-"+event)
	}
	return want
}

// checkReportCounts checks a report's header and wait-event plots against
// its recording: the queries the trace saw and the ones the recording
// holds, each wait event's sleeps.
func checkReportCounts(t *testing.T, dom string, r *record.Recording) {
	t.Helper()
	held := output.Calls(output.ByFingerprint(r.Queries))
	// record counts what it writes: the summary's "reported" is what the
	// file holds, and no more than the queries the trace saw.
	if r.Summary.Reported != uint64(held) || uint64(held) > r.Summary.Queries || held == 0 {
		t.Errorf("the recording holds %d queries, its summary says %d reported of %d seen", held, r.Summary.Reported, r.Summary.Queries)
	}
	if s := fmt.Sprintf("%d queries, %d reported", r.Summary.Queries, held); !strings.Contains(dom, s) {
		t.Errorf("the report's header does not say %q", s)
	}
	if s := fmt.Sprintf("%d queries recorded", held); !strings.Contains(dom, s) {
		t.Errorf("the report does not say %q", s)
	}
	// The cold scan sleeps on its reads (PostgreSQL's IO/DataFileRead):
	// there is a wait event, each with its plot and the recording's count.
	waits := output.ByTotal(r.Summary.WaitHists)
	t.Logf("traced %v: %d queries seen, %d recorded; wait events %q", r.Summary.Traced, r.Summary.Queries, held, waits)
	if len(waits) == 0 {
		t.Error("the recording has no wait-event histogram, though its cold scan slept on its reads")
	}
	for _, event := range waits {
		_, fig, _ := strings.Cut(dom, "<h3>sleeps of queries on wait event "+event+"</h3>")
		fig, _, _ = strings.Cut(fig, "</figure>")
		if s := fmt.Sprintf("count %d, mean", r.Summary.WaitHists[event].Count); !strings.Contains(fig, s) {
			t.Errorf("the plot of wait event %s does not say %q:\n%s", event, s, fig)
		}
	}
}

// The console check must see what it looks for: a page with a console
// error and an uncaught exception is caught.
func TestChromiumConsoleCheckSeesErrors(t *testing.T) {
	browser := needChromium(t)
	page := filepath.Join(t.TempDir(), "bad.html")
	if err := os.WriteFile(page, []byte(`<!DOCTYPE html><html><body><p>x</p><script>console.error("bad thing"); undefinedFunction();</script></body></html>`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, console := chromium(t, browser, page, "--dump-dom")
	if len(console) != 2 || !strings.Contains(console[0], "bad thing") || !strings.Contains(console[1], "undefinedFunction") {
		t.Errorf("console lines found: %q; want the error and the exception", console)
	}
}
