package sqlnorm

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMySQLNormalize(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		// sysbench's oltp_read_write statements, as sent by a prepared
		// statement and as text.
		{"sysbench point select", "SELECT c FROM sbtest1 WHERE id=?", "SELECT c FROM sbtest1 WHERE id=?"},
		{"sysbench point select text", "SELECT c FROM sbtest1 WHERE id=5023", "SELECT c FROM sbtest1 WHERE id=?"},
		{"sysbench simple range",
			"SELECT c FROM sbtest1 WHERE id BETWEEN 5 AND 105",
			"SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?"},
		{"sysbench order range",
			"SELECT c FROM sbtest1 WHERE id BETWEEN 5 AND 105 ORDER BY c",
			"SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c"},
		{"sysbench sum range",
			"SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 5 AND 105",
			"SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?"},
		{"sysbench distinct range",
			"SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c",
			"SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c"},
		{"sysbench index update", "UPDATE sbtest1 SET k=k+1 WHERE id=5020", "UPDATE sbtest1 SET k=k+? WHERE id=?"},
		{"sysbench non-index update",
			"UPDATE sbtest1 SET c='06184436225-32389413378-96495466566' WHERE id=4997",
			"UPDATE sbtest1 SET c=? WHERE id=?"},
		{"sysbench delete", "DELETE FROM sbtest1 WHERE id=5001", "DELETE FROM sbtest1 WHERE id=?"},
		{"sysbench insert",
			"INSERT INTO sbtest1 (id, k, c, pad) VALUES (5, 7, '68487932199-96439406143-93774651418-41631865787-96406072701', '22195207048-70116052123-74140395089-76317954521-98694025897')",
			"INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)"},
		{"sysbench begin commit", "BEGIN; COMMIT", "BEGIN; COMMIT"},

		// Numbers.
		{"integer", "SELECT 42", "SELECT ?"},
		{"decimal", "SELECT 3.14, 5., .5", "SELECT ?, ?, ?"},
		{"exponent", "SELECT 1e5, 1.5E-3, .5e+2, 1.e5", "SELECT ?, ?, ?, ?"},
		{"hex number", "SELECT 0x1F, 0xdeadBEEF", "SELECT ?, ?"},
		{"bit number", "SELECT 0b101, 0b1", "SELECT ?, ?"},
		{"upper-case 0X is an identifier", "SELECT 0X1F, 0B1", "SELECT 0X1F, 0B1"},
		{"digits then letters are an identifier", "SELECT 123abc, 1_000, 0x1G, 0b12, 0x, 1e FROM 2fa_codes",
			"SELECT 123abc, 1_000, 0x1G, 0b12, 0x, 1e FROM 2fa_codes"},
		{"number then identifier", "SELECT 1e5abc, 1.5e, 1.5x", "SELECT ? abc, ? e, ? x"},
		{"qualified digit column", "SELECT t.5, t.1e5, db.t.0x1 FROM t", "SELECT t.5, t.1e5, db.t.0x1 FROM t"},
		{"dot number after space", "SELECT t .5", "SELECT t ?"},
		{"number glued to number", "SELECT 1.2.3", "SELECT ? ?"},
		{"numbers in identifiers stay", "SELECT t1.c2 FROM s3.t1", "SELECT t1.c2 FROM s3.t1"},

		// Unary and binary minus.
		{"unary after =", "WHERE a = -5", "WHERE a = ?"},
		{"unary glued to =", "WHERE a=-5", "WHERE a=?"},
		{"unary after minus", "SELECT a - -5", "SELECT a - ?"},
		{"double dash is arithmetic", "SELECT 1--1", "SELECT ?-?"},
		{"double dash before identifier", "SELECT a--b", "SELECT a- -b"},
		{"double dash word", "SELECT --comment", "SELECT - -comment"},
		{"triple dash", "SELECT a---5", "SELECT a- -?"},
		{"dashes around a comment", "SELECT a--/**/5", "SELECT a- - ?"},
		{"binary minus", "SELECT a-5, a -5, (a)-5, ?-5", "SELECT a-?, a -?, (a)-?, ?-?"},
		{"unary after keyword", "SELECT -5 WHERE x > 0 AND -1 < y", "SELECT ? WHERE x > ? AND ? < y"},
		{"unary after interval", "SELECT NOW() - INTERVAL -1 DAY", "SELECT NOW() - INTERVAL ? DAY"},
		{"unary after default", "CREATE TABLE t (a INT DEFAULT -1)", "CREATE TABLE t (a INT DEFAULT ?)"},
		{"unary hex", "WHERE a = -0x10", "WHERE a = ?"},
		{"minus with space stays", "SELECT - 5", "SELECT - ?"},

		// Strings.
		{"string", "SELECT 'hello'", "SELECT ?"},
		{"double-quoted string", `SELECT "hello"`, "SELECT ?"},
		{"backslash-escaped quote", `SELECT 'it\'s'`, "SELECT ?"},
		{"doubled quote", `SELECT 'it''s', "a""b"`, "SELECT ?, ?"},
		{"backslash at the end", `SELECT 'C:\\', 'x'`, "SELECT ?, ?"},
		{"quotes of the other kind", `SELECT 'a"b', "a'b"`, "SELECT ?, ?"},
		{"adjacent strings are one", "SELECT 'a' 'b', 'c'\n\"d\" , 'e'", "SELECT ?, ? , ?"},
		{"national string", "SELECT N'abc', n'x'", "SELECT ?, ?"},
		{"national string continued", "SELECT N'abc' 'def'", "SELECT ?"},
		{"hex string", "SELECT X'1F', x'ff'", "SELECT ?, ?"},
		{"bit string", "SELECT B'101', b'0'", "SELECT ?, ?"},
		{"introducer", "SELECT _utf8mb4'x', _UTF8MB4'y'", "SELECT ?, ?"},
		{"introducer with space", "SELECT _binary 'x', _latin1\n\"y\"", "SELECT ?, ?"},
		{"introducer of hex and bit", "SELECT _latin1 X'41', _binary 0x41, _utf8mb4 b'1', _binary 0b1", "SELECT ?, ?, ?, ?"},
		{"introducer continued", "SELECT _utf8mb4'a' 'b'", "SELECT ?"},
		{"introducer collate", "SELECT _utf8mb4'x' COLLATE utf8mb4_bin", "SELECT ? COLLATE utf8mb4_bin"},
		{"not an introducer", "SELECT _id 'alias', _utf8mb4, _nosuchcs'x' FROM t", "SELECT _id ?, _utf8mb4, _nosuchcs ? FROM t"},
		{"identifier before quote", "SELECT foo'bar'", "SELECT foo ?"},
		{"typed literal", "WHERE d > DATE '2024-01-01' AND t < TIMESTAMP'2024-01-01 00:00'", "WHERE d > DATE ? AND t < TIMESTAMP ?"},
		{"string with comment chars", "SELECT '-- # /* x'", "SELECT ?"},
		{"json path", "SELECT j->'$.a', j->>\"$.b\"", "SELECT j->?, j->>?"},

		// Identifiers and the like, kept.
		{"backticks", "SELECT `a``b`, `select`, `it's 5` FROM `db`.`t 1`", "SELECT `a``b`, `select`, `it's 5` FROM `db`.`t 1`"},
		{"dollar identifier", "SELECT a$1, $b FROM t", "SELECT a$1, $b FROM t"},
		{"non-ascii identifier", "SELECT été FROM données", "SELECT été FROM données"},
		{"keywords constants kept", "SELECT NULL, TRUE, false, DEFAULT", "SELECT NULL, TRUE, false, DEFAULT"},
		{"user variables", "SET @a = 1, @b.c := 'x'; SELECT @a, @`q`, @'q', @\"q\"",
			"SET @a = ?, @b.c := ?; SELECT @a, @`q`, @?, @?"},
		{"system variables", "SELECT @@global.max_connections, @@SESSION.sql_mode, @@1x", "SELECT @@global.max_connections, @@SESSION.sql_mode, @@1x"},
		{"user at host", "CREATE USER 'bob'@'10.0.0.1' IDENTIFIED BY 'pw'; GRANT ALL ON *.* TO bob@localhost",
			"CREATE USER ?@? IDENTIFIED BY ?; GRANT ALL ON *.* TO bob@localhost"},
		{"operators", "SELECT a <=> b, a != b, a <> b, a >= b, a && b, a || b, a << 2, !a, ~a, a DIV 2, a % 3",
			"SELECT a <=> b, a != b, a <> b, a >= b, a && b, a || b, a << ?, !a, ~a, a DIV ?, a % ?"},

		// Placeholders and lists.
		{"placeholders kept", "SELECT * FROM t WHERE a = ? AND b = 5", "SELECT * FROM t WHERE a = ? AND b = ?"},
		{"placeholders apart", "SELECT ??, ?5", "SELECT ? ?, ? ?"},
		{"in list", "WHERE id IN (1, 2, 3)", "WHERE id IN (?, ?, ?)"},
		{"in list placeholders", "WHERE id IN (?,?,'a')", "WHERE id IN (?,?,?)"},
		{"multi-row values", "INSERT INTO t VALUES (1,'a'),(2,'b')", "INSERT INTO t VALUES (?,?),(?,?)"},
		{"limit", "SELECT * FROM t LIMIT 10 OFFSET 20", "SELECT * FROM t LIMIT ? OFFSET ?"},
		{"limit comma", "SELECT * FROM t LIMIT 20, 10", "SELECT * FROM t LIMIT ?, ?"},

		// Comments.
		{"hash comment", "SELECT 1 # the answer\nFROM t", "SELECT ? FROM t"},
		{"hash comment at end", "SELECT 1; # done", "SELECT ?;"},
		{"hash without space", "SELECT 1 #x\nFROM t", "SELECT ? FROM t"},
		{"dash comment", "SELECT 1 -- the answer\nFROM t", "SELECT ? FROM t"},
		{"dash comment tab", "SELECT 1 --\tx\nFROM t", "SELECT ? FROM t"},
		{"dash comment control", "SELECT 1 --\x01x\nFROM t", "SELECT ? FROM t"},
		{"dash comment at end", "SELECT 1 --", "SELECT ?"},
		{"dash comment newline", "SELECT 1 --\nFROM t", "SELECT ? FROM t"},
		{"line comment ends only at newline", "SELECT 1 -- x\r'secret'\nFROM t", "SELECT ? FROM t"},
		{"block comment", "SELECT /* hint */ 1", "SELECT ?"},
		{"block comments do not nest", "SELECT /* a /* b */ 1 */ 2", "SELECT ? */ ?"},
		{"comment between words", "SELECT a/**/FROM t", "SELECT a FROM t"},
		{"comment next to paren", "SELECT f(/* x */1)", "SELECT f(?)"},
		{"optimizer hint removed", "SELECT /*+ BKA(t1) NO_BKA(t2) */ * FROM t1", "SELECT * FROM t1"},
		{"leading comment", "/* app=web */ SELECT 1", "SELECT ?"},
		{"only comment", "# nothing", ""},

		// Executable comments.
		{"executable comment", "SELECT /*! STRAIGHT_JOIN */ a FROM t", "SELECT STRAIGHT_JOIN a FROM t"},
		{"versioned executable comment", "CREATE /*!32302 TEMPORARY */ TABLE t (a INT)", "CREATE TEMPORARY TABLE t (a INT)"},
		{"mysqldump header", "/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;",
			"SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT ;"},
		{"mysqldump header constant", "/*!40103 SET TIME_ZONE='+00:00' */", "SET TIME_ZONE=?"},
		{"executable comment constants", "SELECT 1 /*!50700 , 2 */, 3", "SELECT ? , ? , ?"},
		{"executable comment glued", "SELECT 1/*!*/2", "SELECT ? ?"},
		{"mariadb executable comment", "SELECT /*M!100500 1, */ 2", "SELECT ?, ?"},
		{"mariadb executable comment no version", "SELECT /*M! 1 */", "SELECT ?"},
		{"six digit version", "SELECT /*!100500 1 */", "SELECT ?"},
		{"short version is code", "SELECT /*!123 a */", "SELECT ? a"},
		{"comment inside executable comment", "SELECT /*! a /* x */ , 'b' */ FROM t", "SELECT a , ? FROM t"},
		{"executable inside executable is a comment", "SELECT /*! a /*! b */ c */", "SELECT a c"},
		{"close outside executable comment", "SELECT 2*/3", "SELECT ?*/?"},
		{"unterminated executable comment", "SELECT /*!50000 1", "SELECT ?"},
		{"string in executable comment", "SELECT /*! '*/' */ 1", "SELECT ? ?"},

		// Whitespace and statements.
		{"whitespace folded", "  SELECT\t\t1,\n\n  2  \r\n FROM\vt  ", "SELECT ?, ? FROM t"},
		{"multi statement", "BEGIN; SELECT 1; COMMIT", "BEGIN; SELECT ?; COMMIT"},
		{"empty", "", ""},
		{"blank", " \n\t ", ""},

		// Robustness.
		{"unterminated string", "SELECT 'secret", "SELECT ?"},
		{"unterminated by an escaped quote", `SELECT 'secret\'`, "SELECT ?"},
		{"unterminated double-quoted string", `SELECT "secret`, "SELECT ?"},
		{"unterminated continuation", "SELECT 'a' 'secret", "SELECT ?"},
		{"unterminated hex string", "SELECT X'1F", "SELECT ?"},
		{"unterminated introduced string", "SELECT _binary 'secret", "SELECT ?"},
		{"unterminated comment", "SELECT 1 /* secret", "SELECT ?"},
		{"unterminated backtick", "SELECT `abc", "SELECT `abc"},
		{"truncated after prefix", "SELECT N", "SELECT N"},
		{"truncated after introducer", "SELECT _utf8mb4 ", "SELECT _utf8mb4"},
		{"lone at", "SELECT @", "SELECT @"},
		{"invalid utf8", "SELECT \xff\xfe FROM t WHERE a = '\xff'", "SELECT \uFFFD FROM t WHERE a = ?"},
		{"nul bytes", "SELECT 1\x00, 'a\x00b'", "SELECT ?\x00, ?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MySQL.Normalize(tt.in)
			if got != tt.want {
				t.Errorf("MySQL.Normalize(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if again := MySQL.Normalize(got); again != got {
				t.Errorf("not idempotent: MySQL.Normalize(%q) = %q", got, again)
			}
			n, f := MySQL.Of(tt.in)
			if n != got || f != MySQL.Fingerprint(got) || f != MySQL.Fingerprint(tt.in) {
				t.Errorf("MySQL.Of(%q) = %q, %x; want %q, %x", tt.in, n, f, got, MySQL.Fingerprint(got))
			}
		})
	}
}

// TestMySQLNoLiteralSurvives checks that no character of a MySQL constant
// appears in the output.
func TestMySQLNoLiteralSurvives(t *testing.T) {
	const secret = "s3cr3tXy"
	tests := []struct {
		name, in string
		secrets  []string // substrings that must not survive; default secret
	}{
		{"string", "SELECT * FROM u WHERE name = 's3cr3tXy'", nil},
		{"double-quoted string", `SELECT * FROM u WHERE name = "s3cr3tXy"`, nil},
		{"backslash escapes", `SELECT 'it\'s s3cr3tXy\\'`, []string{secret, "it", `\`}},
		{"doubled quotes", `SELECT "say ""s3cr3tXy"""`, []string{secret, "say", `"`}},
		{"escaped newline", `SELECT 's3cr3tXy\n'`, []string{secret, `\n`}},
		{"adjacent strings", "SELECT 's3cr' '3tXy'", []string{"s3cr", "3tXy"}},
		{"adjacent strings over lines", "SELECT 's3cr'\n\n\"3tXy\"", []string{"s3cr", "3tXy"}},
		{"national string", "SELECT N's3cr3tXy'", nil},
		{"hex string", "SELECT X'5ec3e7'", []string{"5ec3e7", "X'"}},
		{"bit string", "SELECT b'10110111011'", []string{"10110111011", "b'"}},
		{"hex number", "SELECT 0xFEEDFACE", []string{"FEEDFACE", "0x"}},
		{"bit number", "SELECT 0b1101101", []string{"1101101"}},
		{"introducer", "SELECT _utf8mb4's3cr3tXy'", []string{secret, "_utf8mb4"}},
		{"introducer with space", "SELECT _binary 's3cr3tXy'", []string{secret, "_binary"}},
		{"introducer hex", "SELECT _latin1 X'5ec3e7'", []string{"5ec3e7", "_latin1"}},
		{"integer", "SELECT 987654321", []string{"987654321"}},
		{"negative", "SELECT -987654321", []string{"987654321", "-"}},
		{"decimal", "SELECT 98765.4321", []string{"98765", "4321"}},
		{"exponent", "SELECT 9.87e65", []string{"9.87", "e65"}},
		{"in list", "WHERE a IN (987654, 's3cr3tXy')", []string{"987654", secret}},
		{"values", "INSERT INTO t VALUES (987654, 's3cr3tXy'), (1, 'other')", []string{"987654", secret, "other"}},
		{"json", `SELECT '{"k": "s3cr3tXy"}'`, nil},
		{"password", "ALTER USER 'root'@'localhost' IDENTIFIED BY 's3cr3tXy'", []string{secret, "root"}},
		{"executable comment", "/*!40101 SET @a = 's3cr3tXy' */", nil},
		{"unterminated string", "SELECT 's3cr3tXy", nil},
		{"unterminated by backslash", `SELECT 's3cr3tXy\`, nil},
		{"unterminated double-quoted", `SELECT "s3cr3tXy`, nil},
		{"unterminated after lines", "SELECT 'a',\n 'b\ns3cr3tXy", nil},
		{"hash comment", "SELECT 1 # s3cr3tXy", nil},
		{"dash comment", "SELECT 1 -- s3cr3tXy", nil},
		{"dash comment with cr", "SELECT 1 -- x\rs3cr3tXy", nil},
		{"block comment", "SELECT /* s3cr3tXy */ 1", nil},
		{"hint", "SELECT /*+ s3cr3tXy */ 1", nil},
		{"unterminated comment", "SELECT 1 /* s3cr3tXy", nil},
		{"invalid utf8 in string", "SELECT 's3cr3tXy\xff'", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MySQL.Normalize(tt.in)
			secrets := tt.secrets
			if secrets == nil {
				secrets = []string{secret}
			}
			for _, s := range secrets {
				if strings.Contains(got, s) {
					t.Errorf("MySQL.Normalize(%q) = %q keeps %q", tt.in, got, s)
				}
			}
		})
	}
}

func TestMySQLFingerprintSameShape(t *testing.T) {
	groups := [][]string{
		{
			"SELECT c FROM sbtest1 WHERE id=?",
			"SELECT c FROM sbtest1 WHERE id=5023",
			"select c from sbtest1 where id = -1;",
			"SELECT c FROM sbtest1 WHERE id='5023' # point select",
			"SELECT /* sysbench */ c FROM sbtest1 WHERE id = 0x13A7 -- c",
			"SELECT `c` FROM `sbtest1` WHERE `id` = _utf8mb4'5023'",
			"SELECT c FROM SBTEST1 WHERE ID = \"5023\"",
			"/*!SELECT c FROM sbtest1 WHERE id=?*/",
		},
		{
			"SELECT * FROM t WHERE id IN (1, 2, 3)",
			"SELECT * FROM t WHERE id IN (4)",
			"SELECT * FROM t WHERE id IN (?, ?)",
			"SELECT * FROM t WHERE id IN ('a', ?, -3, 0x4, X'5', b'1', _binary'x', N'y')",
			"SELECT * FROM t WHERE id in (1,2,3,4,5,6,7,8,9,10)",
		},
		{
			"INSERT INTO sbtest1 (id, k, c, pad) VALUES (5, 7, 'c', 'pad')",
			"INSERT INTO sbtest1 (id, k, c, pad) VALUES (5, 7, 'c', 'pad'), (6, 8, 'c', 'pad')",
			"INSERT INTO sbtest1 (id, k, c, pad) VALUES (?,?,?,?),(?,?,?,?),(?,?,?,?)",
		},
		{
			"insert into sbtest1 (id, k, c, pad) value (1, 2, 'c', 'pad')",
			"INSERT INTO sbtest1 (id, k, c, pad) VALUE (1, 2, 'c', 'pad'), (3, 4, 'c', 'pad')",
		},
		{
			// Rows with the same tokens but constants.
			"INSERT INTO t VALUES (1, NOW(), NULL)",
			"INSERT INTO t VALUES (1, NOW(), NULL), (2, now(), null), (?, NOW(), NULL)",
		},
		{
			"INSERT INTO t VALUES (1, 2) ON DUPLICATE KEY UPDATE a = VALUES(a), b = VALUES(b)",
			"INSERT INTO t VALUES (1, 2), (3, 4) ON DUPLICATE KEY UPDATE a = VALUES(a), b = VALUES(b)",
		},
		{
			"SELECT * FROM (VALUES ROW(1, 2), ROW(3, 4)) AS v",
			"SELECT * FROM (VALUES ROW(5, 6)) AS v",
		},
		{
			"SELECT 1",
			"SELECT 1;",
			"SELECT 'a' 'b';",
		},
		{
			"SELECT a - 5",
			"SELECT a-5",
			"SELECT a -5",
			"SELECT a--5",
			"SELECT a - -5",
		},
	}
	for _, g := range groups {
		want := MySQL.Fingerprint(MySQL.Normalize(g[0]))
		for _, q := range g[1:] {
			if got := MySQL.Fingerprint(MySQL.Normalize(q)); got != want {
				t.Errorf("MySQL.Fingerprint(Normalize(%q)) = %x, want %x as for %q\ncanonical %q\n      vs  %q",
					q, got, want, g[0], MySQL.canonical(q), MySQL.canonical(g[0]))
			}
			if got := MySQL.Fingerprint(q); got != want {
				t.Errorf("MySQL.Fingerprint(%q) = %x, want %x as for %q", q, got, want, g[0])
			}
		}
	}
}

func TestMySQLFingerprintDifferentShapes(t *testing.T) {
	queries := []string{
		"SELECT c FROM sbtest1 WHERE id=?",
		"SELECT c FROM sbtest2 WHERE id=?",
		"SELECT c FROM sbtest1 WHERE id>?",
		"SELECT c FROM sbtest1 WHERE id=? AND k=?",
		"SELECT c FROM sbtest1 WHERE id=NULL",
		"SELECT c FROM sbtest1 WHERE id=id",
		"SELECT c FROM sbtest1 WHERE id=-?",
		"SELECT c FROM `sbtest 1` WHERE id=?",
		"SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?",
		"SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c",
		"SELECT * FROM t WHERE a IN (?, ?)",
		"SELECT * FROM t WHERE a IN (?, b)",
		"SELECT * FROM t WHERE a NOT IN (?, ?)",
		"SELECT f(?)",
		"SELECT f(?, ?)",
		"INSERT INTO t VALUES (?)",
		"INSERT INTO t VALUES (?, ?)",
		"INSERT INTO t VALUES (?, ?), (?, NOW())",
		"INSERT INTO t VALUES (?, NOW())",
		"INSERT INTO t (a) VALUES (?)",
		"SELECT 1--1",
		"SELECT 1",
		"SELECT a FROM t # c\nWHERE b = 1",
		"SELECT a FROM t",
		"BEGIN; SELECT 1; COMMIT",
		"BEGIN; SELECT 1",
		"SELECT @a",
		"SELECT @@a",
		"",
	}
	seen := map[uint64]string{}
	for _, q := range queries {
		f := MySQL.Fingerprint(q)
		if prev, ok := seen[f]; ok {
			t.Errorf("MySQL.Fingerprint(%q) == MySQL.Fingerprint(%q) = %x", q, prev, f)
		}
		seen[f] = q
	}
}

func TestMySQLCanonical(t *testing.T) {
	tests := []struct{ in, want string }{
		{"SELECT  A, `B`, `c d`, `e``f` FROM T WHERE x = ? # c", "select a , b , `c d` , `e``f` from t where x = ?"},
		{"SELECT * FROM t WHERE id IN (1, 2, 3);", "select * from t where id in ( ?... )"},
		{"INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')", "insert into t values ( ? , ? )"},
		{"INSERT INTO t VALUES (1, 'a'), (2, b)", "insert into t values ( ? , ? ) , ( ? , b )"},
		{"INSERT INTO t VALUES (1), (2), (3, 4), (5, 6)", "insert into t values ( ? ) , ( ? , ? ) , ( ? , ? )"},
		{"SELECT a IN (1, b)", "select a in ( ? , b )"},
		{"SELECT @a, @@b.c", "select @ a , @@ b . c"},
		{"SELECT ÉTÉ", "select ÉtÉ"},
	}
	for _, tt := range tests {
		if got := string(MySQL.canonical(tt.in)); got != tt.want {
			t.Errorf("MySQL.canonical(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestMySQLFingerprintStable(t *testing.T) {
	const q = "SELECT c FROM sbtest1 WHERE id=?"
	// FNV-1a 64 of "select c from sbtest1 where id = ?".
	const want uint64 = 0xe5d627bff6670a06
	if got, want := string(MySQL.canonical(q)), "select c from sbtest1 where id = ?"; got != want {
		t.Errorf("MySQL.canonical(%q) = %q, want %q", q, got, want)
	}
	if got := MySQL.Fingerprint(q); got != want {
		t.Errorf("MySQL.Fingerprint(%q) = %#x, want %#x: the fingerprint algorithm changed", q, got, want)
	}
}

// TestDialects checks that the package-level functions are the PostgreSQL
// dialect's, and that an unknown dialect behaves as PostgreSQL.
func TestDialects(t *testing.T) {
	const q = "SELECT `a`, \"b\", 'c', 1 # x\n FROM t WHERE id IN (1, 2) -- y"
	n, f := Of(q)
	for _, d := range []Dialect{PostgreSQL, Dialect(0), Dialect(200)} {
		if dn, df := d.Of(q); dn != n || df != f || d.Normalize(q) != Normalize(q) || d.Fingerprint(q) != Fingerprint(q) {
			t.Errorf("%v.Of(%q) = %q, %x; want %q, %x", d, q, dn, df, n, f)
		}
	}
	if want := "SELECT `a`, \"b\", $1, $2 # x FROM t WHERE id IN ($3, $4)"; n != want {
		t.Errorf("Of(%q) = %q, want %q", q, n, want)
	}
	if got, want := MySQL.Normalize(q), "SELECT `a`, ?, ?, ? FROM t WHERE id IN (?, ?)"; got != want {
		t.Errorf("MySQL.Normalize(%q) = %q, want %q", q, got, want)
	}
	if PostgreSQL.String() != "PostgreSQL" || MySQL.String() != "MySQL" {
		t.Errorf("String() = %q, %q", PostgreSQL.String(), MySQL.String())
	}
}

func TestMySQLLargeInput(t *testing.T) {
	var b strings.Builder
	b.WriteString("INSERT INTO t (a, b) VALUES ")
	for i := 0; i < 100000; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(123456, 'abc')")
	}
	n, f := MySQL.Of(b.String())
	if !strings.HasPrefix(n, "INSERT INTO t (a, b) VALUES (?, ?), (?, ?), ") || !strings.HasSuffix(n, "), (?, ?)") {
		t.Errorf("unexpected normalization of a large insert: %.80q...", n)
	}
	if want := MySQL.Fingerprint("INSERT INTO t (a, b) VALUES (?, ?)"); f != want {
		t.Errorf("large VALUES list fingerprint %x, want %x", f, want)
	}

	// Pathological inputs that a careless lexer handles in quadratic time.
	for _, q := range []string{
		strings.Repeat("/*!", 1<<18),
		strings.Repeat("/*!*/", 1<<18),
		strings.Repeat("'x' ", 1<<18),
		strings.Repeat("_utf8 ", 1<<18),
		strings.Repeat("-", 1<<18) + "5",
		strings.Repeat("- ", 1<<18) + "5",
		strings.Repeat("0x", 1<<18),
		strings.Repeat("1e", 1<<18),
		strings.Repeat("a.", 1<<18),
		strings.Repeat("@", 1<<18),
		strings.Repeat("IN (1, ", 1<<16),
		strings.Repeat("VALUES (", 1<<16) + strings.Repeat("1), (", 1<<16),
		strings.Repeat("VALUES (1, ", 1<<16) + strings.Repeat(")", 1<<16) + strings.Repeat(", (1", 1<<16),
		strings.Repeat("\xff", 1<<18),
	} {
		n := MySQL.Normalize(q)
		if !utf8.ValidString(n) {
			t.Errorf("invalid UTF-8 output for %.20q...", q)
		}
		_ = MySQL.Fingerprint(q)
	}
}

func BenchmarkMySQLOf(b *testing.B) {
	const q = "INSERT INTO sbtest1 (id, k, c, pad) VALUES (5, 7, '68487932199-96439406143', '22195207048-70116052123')"
	b.ReportAllocs()
	for b.Loop() {
		MySQL.Of(q)
	}
}
