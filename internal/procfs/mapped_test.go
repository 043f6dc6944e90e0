package procfs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbiolat/dbiolat/internal/testenv"
)

// The paths tried for a mapped file, in order, for each way a process's
// root and mount namespace can relate to ours (the names as the kernel
// gives them: see MappedFile).
func TestMappedCandidates(t *testing.T) {
	const proc, mapFile = "/proc/7/root", "/proc/7/map_files/1000-2000"
	for _, c := range []struct {
		what, rootSeen, file string
		want                 []string
	}{
		{"our own root", "/", "/usr/lib/libssl.so.3",
			[]string{"/proc/7/root/usr/lib/libssl.so.3", "/usr/lib/libssl.so.3", mapFile}},
		{"a container (its own mount namespace)", "/", "/usr/lib/x86_64-linux-gnu/libssl.so.3",
			[]string{"/proc/7/root/usr/lib/x86_64-linux-gnu/libssl.so.3", "/usr/lib/x86_64-linux-gnu/libssl.so.3", mapFile}},
		{"a plain chroot", "/var/cache/dbiolat/roots/pg", "/var/cache/dbiolat/roots/pg/usr/lib/libssl.so.3",
			[]string{"/proc/7/root/usr/lib/libssl.so.3", "/proc/7/root/var/cache/dbiolat/roots/pg/usr/lib/libssl.so.3",
				"/var/cache/dbiolat/roots/pg/usr/lib/libssl.so.3", mapFile}},
		{"a chroot inside a container, named as the container sees it", "/srv/root", "/srv/root/usr/lib/libssl.so.3",
			[]string{"/proc/7/root/usr/lib/libssl.so.3", "/proc/7/root/srv/root/usr/lib/libssl.so.3", "/srv/root/usr/lib/libssl.so.3", mapFile}},
		{"a root's directory with a space, trailing slash", "/srv/my root/", "/srv/my root/lib/libc.so.6",
			[]string{"/proc/7/root/lib/libc.so.6", "/proc/7/root/srv/my root/lib/libc.so.6", "/srv/my root/lib/libc.so.6", mapFile}},
		{"a file mapped from outside the chroot", "/srv/root", "/srv/rootless/lib/libc.so.6",
			[]string{"/proc/7/root/srv/rootless/lib/libc.so.6", "/srv/rootless/lib/libc.so.6", mapFile}},
		{"the root's link unread", "", "/usr/lib/libssl.so.3",
			[]string{"/proc/7/root/usr/lib/libssl.so.3", "/usr/lib/libssl.so.3", mapFile}},
	} {
		if got := mappedCandidates(proc, c.rootSeen, c.file, mapFile); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q", c.what, got)
		}
	}
}

// Lines of maps, as the kernel pads them; a path may hold spaces.
func TestParseMapping(t *testing.T) {
	for _, c := range []struct {
		line string
		want Mapping
		ok   bool
	}{
		{"7f1c2a000000-7f1c2a028000 r--p 00000000 fe:00 1234                       /srv/my root/lib/libc.so.6",
			Mapping{Lo: 0x7f1c2a000000, Hi: 0x7f1c2a028000, Perms: "r--p", Dev: 0xfe00, Inode: 1234, Path: "/srv/my root/lib/libc.so.6"}, true},
		{"55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]",
			Mapping{Lo: 0x55d0c0a00000, Hi: 0x55d0c0a21000, Perms: "rw-p", Path: "[heap]"}, true},
		{"7f1c2a200000-7f1c2a201000 r-xp 00002000 08:01 99 /usr/lib/libssl.so.3 (deleted)",
			Mapping{Lo: 0x7f1c2a200000, Hi: 0x7f1c2a201000, Perms: "r-xp", Offset: 0x2000, Dev: 0x801, Inode: 99, Path: "/usr/lib/libssl.so.3 (deleted)"}, true},
		{"7ffd5a1e0000-7ffd5a201000 rw-p 00000000 00:00 0", Mapping{Lo: 0x7ffd5a1e0000, Hi: 0x7ffd5a201000, Perms: "rw-p"}, true},
		{"garbage", Mapping{}, false},
	} {
		got, ok := parseMapping(c.line)
		if ok != c.ok || got != c.want {
			t.Errorf("%q: %+v, %v", c.line, got, ok)
		}
	}
}

// A process's libc, found through MappedFile, is the very file it maps, in
// each case: our own root; a plain chroot; a mount namespace of its own
// whose root is a directory pivoted into (a container); a chroot inside
// such a namespace. Where the host has a file of the same name (the
// root's copy outside the namespace), it is not the one chosen.
func TestMappedFileInRoots(t *testing.T) {
	testenv.NeedRoot(t)
	for _, tool := range []string{"unshare", "pivot_root", "chroot", "ldd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s (util-linux, coreutils, libc-bin) is needed: %v", tool, err)
		}
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "a root") // a space, as a user's directory may have
	makeRoot(t, root)
	cases := []struct{ what, script string }{
		{"our own root", `exec sleep 60`},
		{"a plain chroot", `exec chroot "$ROOT" /bin/sleep 60`},
		// Its own mount namespace, the root a tmpfs copy of the root
		// mounted over its directory: the host's directory of that name
		// holds other files (the same names, other inodes). The old root
		// stays at /old (a runtime detaches it; the names do not change).
		{"a container", `exec unshare --mount --propagation private sh -ec '
			mount -t tmpfs tmpfs "$ROOT.c"; cp -a "$ROOT"/. "$ROOT.c"; cd "$ROOT.c"
			mkdir old; pivot_root . old
			exec /bin/sleep 60'`},
		{"a chroot inside a container", `exec unshare --mount --propagation private sh -ec '
			mount -t tmpfs tmpfs "$ROOT.c"; mkdir "$ROOT.c/srv"; cp -a "$ROOT" "$ROOT.c/srv/inner"; cp -a "$ROOT"/. "$ROOT.c"
			cd "$ROOT.c"; mkdir old; pivot_root . old
			exec /old$CHROOT /srv/inner /bin/sleep 60'`},
	}
	if err := os.Mkdir(root+".c", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			cmd := exec.Command("sh", "-ec", c.script)
			chroot, _ := exec.LookPath("chroot") // it links libc alone, which the root has
			cmd.Env = append(os.Environ(), "ROOT="+root, "CHROOT="+chroot)
			out := &strings.Builder{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			var libc Mapping
			var pid int
			for end := time.Now().Add(10 * time.Second); libc.Path == ""; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("sleep never mapped libc: %s", out)
				}
				pid = sleeper(cmd.Process.Pid)
				maps, _ := Maps(pid)
				for _, m := range maps {
					if strings.HasPrefix(filepath.Base(m.Path), "libc.so") && ExeName(pid) == "sleep" {
						libc = m
						break
					}
				}
			}
			file, err := MappedFile(pid, libc)
			if err != nil {
				t.Fatal(err)
			}
			var st, named unix.Stat_t
			if err := unix.Stat(file, &st); err != nil {
				t.Fatal(err)
			}
			if st.Dev != libc.Dev || st.Ino != libc.Inode {
				t.Errorf("maps says %s (dev %d inode %d); %s is dev %d inode %d", libc.Path, libc.Dev, libc.Inode, file, st.Dev, st.Ino)
			}
			hidden := c.what != "our own root" && c.what != "a plain chroot"
			if unix.Stat(libc.Path, &named) == nil && named.Dev == st.Dev && named.Ino == st.Ino && hidden {
				t.Errorf("%s, named as maps names it, opens from here: the test does not hide the namespace's file", libc.Path)
			}
			t.Logf("maps names %s; opened as %s", libc.Path, file)
		})
	}
}

// sleeper is the process running sleep at or below pid (unshare forks).
func sleeper(pid int) int {
	for range 4 {
		if ExeName(pid) == "sleep" {
			return pid
		}
		b, _ := os.ReadFile(Path(pid, "task", pid, "children"))
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return pid
		}
		fmt.Sscan(f[0], &pid)
	}
	return pid
}

// makeRoot puts sleep, and the libraries it links, in a directory of its
// own: the smallest root a process can chroot into.
func makeRoot(t *testing.T, root string) {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ldd", sleep).Output()
	if err != nil {
		t.Fatal(err)
	}
	files := []string{sleep}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "/") {
			files = append(files, f)
		}
	}
	for _, f := range files {
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, f)
		if f == sleep {
			dst = filepath.Join(root, "bin", "sleep")
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", real, dst).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
}
