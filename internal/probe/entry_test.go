package probe

import "testing"

// Where an entry probe goes, on the prologues of the functions dbiolat
// probes (bytes from Debian 12's builds).
func TestEntryOffset(t *testing.T) {
	for _, c := range []struct {
		name string
		code []byte
		want uint64
	}{
		// MariaDB 10.11's thd_wait_begin: test %rdi,%rdi; je: the jump.
		{"test then je", []byte{0x48, 0x85, 0xff, 0x74, 0x23, 0x48, 0x8b, 0x87}, 3},
		// MariaDB 11.8's (sid): endbr64; test; je.
		{"endbr64, test, je", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x85, 0xff, 0x74, 0x1f}, 7},
		// MySQL 9.7's: endbr64; lea x(%rip),%rax; mov (%rax),%rax; test %rax,%rax; je.
		{"endbr64, lea, load, test, je", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x8d, 0x05, 0x8d, 0x39, 0x6d, 0x03,
			0x48, 0x8b, 0x00, 0x48, 0x85, 0xc0, 0x74, 0x0d}, 17},
		// A load into an argument register: stays.
		{"load into rdi", []byte{0x48, 0x8b, 0x38, 0x74, 0x02}, 0},
		// A store to memory: stays.
		{"store", []byte{0x48, 0x89, 0x00, 0x74, 0x02}, 0},
		// glibc's send: cmpb $0,__libc_single_threaded(%rip); mov %ecx,%r10d; je.
		{"cmp rip, mov to r10, je", []byte{0x80, 0x3d, 0x91, 0x0a, 0x0d, 0x00, 0x00, 0x41, 0x89, 0xca, 0x74, 0x1c}, 10},
		// glibc's sendmsg: cmpb $0,...(%rip); je.
		{"cmp rip, je", []byte{0x80, 0x3d, 0xd1, 0x09, 0x0d, 0x00, 0x00, 0x74, 0x17}, 7},
		// push %rbp first: emulated where it is.
		{"push", []byte{0x55, 0x48, 0x89, 0xe5}, 0},
		{"endbr64, push %r15", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x57}, 4},
		// OpenSSL's SSL_read: sub $0x18,%rsp moves the stack: stays.
		{"sub rsp", []byte{0x48, 0x83, 0xec, 0x18, 0x64, 0x48, 0x8b, 0x04}, 0},
		// A mov into an argument register: stays.
		{"mov into rdi", []byte{0x48, 0x89, 0xf7, 0x74, 0x02}, 0},
		{"mov into rax", []byte{0x48, 0x89, 0xf8, 0x74, 0x02}, 3},
		// No emulated instruction within the bytes read.
		{"test only", []byte{0x48, 0x85, 0xff}, 0},
		{"empty", nil, 0},
	} {
		if got := entryOffset(c.code); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
