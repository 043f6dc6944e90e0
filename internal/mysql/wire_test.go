package mysql

import (
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Payloads captured with strace -xx on a thread of MariaDB 10.11.19
// (Debian 12) serving the mariadb client (libmariadb 3.3.20) and sysbench
// 1.0.20 oltp_read_write (the same library): the bytes after each packet's
// 4-byte header.
const (
	// The greeting: version "5.5.5-10.11.19-MariaDB-0+deb12u1", connection
	// 6, capabilities 0x81fff7fe (no CLIENT_SSL; CLIENT_MYSQL clear, so
	// MariaDB's 0x1d follow), auth plugin mysql_native_password.
	capGreeting = `0a352e352e352d31302e31312e31392d4d6172696144422d302b6465623132753100060000006f43415921342557
		00fef7080200ff81150000000000001d00000068257e6c26702872286b663d006d7973716c5f6e61746976655f70617373776f726400`
	// The same server started with --ssl-cert: CLIENT_SSL set (0xfffe).
	capGreetingSSL = `0a352e352e352d31302e31312e31392d4d6172696144422d302b646562313275310003000000347c38417e755173
		00feff080200ff81150000000000001d000000725f686a5a6671276b653c3a006d7973716c5f6e61746976655f70617373776f726400`
	// sysbench's HandshakeResponse41: caps 0x00bfa28c (CLIENT_CONNECT_WITH_DB,
	// no CLIENT_DEPRECATE_EOF), MariaDB caps 0x1d, user root, empty auth
	// response, database sbtest, then its plugin and connection attributes.
	capSysbenchResponse = `8ca2bf00000010002d000000000000000000000000000000000000001d000000726f6f740000736274657374006d797371
		6c5f6e61746976655f70617373776f7264006b035f6f73054c696e75780c5f636c69656e745f6e616d650a6c69626d617269616462045f706964
		04353938390f5f636c69656e745f76657273696f6e06332e332e3230095f706c6174666f726d067838365f36340c5f7365727665725f686f7374
		096c6f63616c686f7374`
	// mariadb-admin's: caps 0x80bea284, no database.
	capAdminResponse = `84a2be800000100021000000000000000000000000000000000000001d000000726f6f7400006d7973716c5f6e61746976
		655f70617373776f7264006c035f6f73054c696e75780c5f636c69656e745f6e616d650a6c69626d617269616462045f70696404363431380f
		5f636c69656e745f76657273696f6e06332e332e3230095f706c6174666f726d067838365f36340c70726f6772616d5f6e616d650a6d7973716c61646d696e`
	// mariadb --ssl's SSLRequest: the 32-byte short form, caps 0x00bfaa84.
	capSSLRequest = `84aabf000000100021000000000000000000000000000000000000001d000000`

	capInitDB       = `026d7973716c` // USE mysql
	capPing         = `0e`
	capStatistics   = `09`
	capRefresh      = `072e`
	capQuit         = `01`
	capPrepareBegin = `16424547494e` // sysbench prepares BEGIN and COMMIT too
	capPrepare      = `1653454c45435420632046524f4d20736274657374312057484552452069643d3f`
	// The reply to capPrepare: statement 3, 1 column, 1 parameter.
	capPrepareOK = `000300000001000100000000`
	// COM_STMT_EXECUTE of statement 3: flags 0, iteration count 1, null
	// bitmap 00, types sent (01): LONGLONG (08 00), value 49.
	capExecuteTypes = `17030000000001000000000108003100000000000000`
	// The next executes of it send no types (00).
	capExecute = `1703000000000100000000003300000000000000`
	// An INSERT's execute (statement 11), with its strings.
	capExecuteInsert = `170b000000000100000000003c0000000000000032000000000000007737333336373331313436302d3534333832
		3237313331362d39373031333534333031322d34383139353036323039382d37383237303732363333362d38343933373238363739392d3737
		3535363032393733302d36303839303134343433302d39313830343339393632362d32393838303435313833323b38303639383032343232342d
		33333034383233383630342d36363130323937343634312d34393939373534313035312d3634363233393031343538`
	capClose = `1903000000`
)

// "SELECT 1+1 AS two", as the mariadb client sent it.
const capQuerySelect = `0353454c45435420312b31204153207477 6f`

// MySQL's documented COM_QUERY with one query attribute (its source
// documentation's example; MariaDB implements no query attributes):
// count 1, one set, null bitmap 00, bind flag 01, type STRING (fe 00),
// name "a", value "1", then the text.
const docQueryAttrs = `0301010001fe0001610131 73656c65637420404076657273696f6e5f636f6d6d656e74206c696d69742031`

func TestParseCommand(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		want Command
	}{
		{"query", capQuerySelect, Command{Code: ComQuery, Name: "COM_QUERY", Text: "SELECT 1+1 AS two"}},
		{"init db", capInitDB, Command{Code: ComInitDB, Name: "COM_INIT_DB", Text: "mysql"}},
		{"ping", capPing, Command{Code: ComPing, Name: "COM_PING"}},
		{"statistics", capStatistics, Command{Code: ComStatistics, Name: "COM_STATISTICS"}},
		{"refresh", capRefresh, Command{Code: ComRefresh, Name: "COM_REFRESH"}},
		{"quit", capQuit, Command{Code: ComQuit, Name: "COM_QUIT"}},
		{"prepare BEGIN", capPrepareBegin, Command{Code: ComStmtPrepare, Name: "COM_STMT_PREPARE", Text: "BEGIN"}},
		{"prepare", capPrepare, Command{Code: ComStmtPrepare, Name: "COM_STMT_PREPARE", Text: "SELECT c FROM sbtest1 WHERE id=?"}},
		{"execute with types", capExecuteTypes, Command{Code: ComStmtExecute, Name: "COM_STMT_EXECUTE", StmtID: 3}},
		{"execute", capExecute, Command{Code: ComStmtExecute, Name: "COM_STMT_EXECUTE", StmtID: 3}},
		{"execute an insert", capExecuteInsert, Command{Code: ComStmtExecute, Name: "COM_STMT_EXECUTE", StmtID: 11}},
		{"close", capClose, Command{Code: ComStmtClose, Name: "COM_STMT_CLOSE", StmtID: 3}},
		{"execute cut in its id", "170300", Command{Code: ComStmtExecute, Name: "COM_STMT_EXECUTE", Truncated: true}},
		{"fetch", "1c0700000064000000", Command{Code: ComStmtFetch, Name: "COM_STMT_FETCH", StmtID: 7}},
		{"long data", "18050000000000616263", Command{Code: ComStmtSendLongData, Name: "COM_STMT_SEND_LONG_DATA", StmtID: 5}},
		{"MariaDB's bulk execute", "fa0900000080000800", Command{Code: ComStmtBulkExecute, Name: "COM_STMT_BULK_EXECUTE", StmtID: 9}},
		{"MariaDB's execute of the statement prepared last", "17ffffffff0001000000", Command{Code: ComStmtExecute, Name: "COM_STMT_EXECUTE", StmtID: StmtLast}},
		{"field list", "047431002a", Command{Code: ComFieldList, Name: "COM_FIELD_LIST", Text: "t1"}},
		{"field list cut", "047431", Command{Code: ComFieldList, Name: "COM_FIELD_LIST", Text: "t1", Truncated: true}},
		{"reset connection", "1f", Command{Code: ComResetConnection, Name: "COM_RESET_CONNECTION"}},
		{"query attributes, guessed", docQueryAttrs, Command{Code: ComQuery, Name: "COM_QUERY", Text: "select @@version_comment limit 1"}},
		{"no query attributes, guessed", "030001" + hex.EncodeToString([]byte("SELECT 1")), Command{Code: ComQuery, Name: "COM_QUERY", Text: "SELECT 1"}},
	} {
		got, ok := ParseCommand(unhex(t, c.in))
		if !ok || got != c.want {
			t.Errorf("%s: got %+v %v, want %+v", c.name, got, ok, c.want)
		}
	}
	for _, bad := range []string{"", "22", "ff", "fe"} {
		if c, ok := ParseCommand(unhex(t, bad)); ok {
			t.Errorf("ParseCommand(%s) = %+v, want not a command", bad, c)
		}
	}
}

func TestParseCommandCaps(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		caps uint32
		want Command
	}{
		{"attributes negotiated", docQueryAttrs, ClientQueryAttributes, Command{Code: ComQuery, Name: "COM_QUERY", Text: "select @@version_comment limit 1"}},
		{"no attributes: the bytes are the text", "030001" + hex.EncodeToString([]byte("x")), 0, Command{Code: ComQuery, Name: "COM_QUERY", Text: "\x00\x01x"}},
		{"attributes, none sent", "030001" + hex.EncodeToString([]byte("SELECT 2")), ClientQueryAttributes, Command{Code: ComQuery, Name: "COM_QUERY", Text: "SELECT 2"}},
		{"attributes cut", docQueryAttrs[:14], ClientQueryAttributes, Command{Code: ComQuery, Name: "COM_QUERY", Truncated: true}},
		// Two attributes, one NULL: types LONGLONG and TIMESTAMP (with a length byte).
		{"attributes of other types", "03" + "02" + "01" + "01" + "01" + "0800" + "0178" + "0700" + "0179" +
			"04" + "e8070102" + hex.EncodeToString([]byte("DO 1")), ClientQueryAttributes,
			Command{Code: ComQuery, Name: "COM_QUERY", Text: "DO 1"}},
		{"prepare carries no attributes", capPrepare, ClientQueryAttributes, Command{Code: ComStmtPrepare, Name: "COM_STMT_PREPARE", Text: "SELECT c FROM sbtest1 WHERE id=?"}},
	} {
		got, ok := ParseCommandCaps(unhex(t, c.in), c.caps)
		if !ok || got != c.want {
			t.Errorf("%s: got %+v %v, want %+v", c.name, got, ok, c.want)
		}
	}
}

func TestParseHandshakeResponse(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		want HandshakeResponse
	}{
		{"sysbench", capSysbenchResponse, HandshakeResponse{Caps: 0x00bfa28c, MariaDBCaps: 0x1d, User: "root", Database: "sbtest",
			Attributes: map[string]string{"_os": "Linux", "_client_name": "libmariadb", "_pid": "5989", "_client_version": "3.3.20",
				"_platform": "x86_64", "_server_host": "localhost"}}},
		{"mariadb-admin", capAdminResponse, HandshakeResponse{Caps: 0x80bea284, MariaDBCaps: 0x1d, User: "root",
			Attributes: map[string]string{"_os": "Linux", "_client_name": "libmariadb", "_pid": "6418", "_client_version": "3.3.20",
				"_platform": "x86_64", ProgramName: "mysqladmin"}}},
		{"SSLRequest", capSSLRequest, HandshakeResponse{Caps: 0x00bfaa84, MariaDBCaps: 0x1d, SSLRequest: true}},
		{"cut in the user", capSysbenchResponse[:70], HandshakeResponse{Caps: 0x00bfa28c, MariaDBCaps: 0x1d, User: "roo", Truncated: true}},
		{"cut in the filler", capSysbenchResponse[:40], HandshakeResponse{Caps: 0x00bfa28c, Truncated: true}},
		// the last pair cut: the whole ones are kept
		{"cut in the attributes", capAdminResponse[:len(capAdminResponse)-4], HandshakeResponse{Caps: 0x80bea284, MariaDBCaps: 0x1d, User: "root",
			Attributes: map[string]string{"_os": "Linux", "_client_name": "libmariadb", "_pid": "6418", "_client_version": "3.3.20",
				"_platform": "x86_64"}, Truncated: true}},
	} {
		got, ok := ParseHandshakeResponse(unhex(t, c.in))
		if !ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v %v, want %+v", c.name, got, ok, c.want)
		}
	}
	r, _ := ParseHandshakeResponse(unhex(t, capSysbenchResponse))
	if r.Caps&ClientDeprecateEOF != 0 || r.Caps&ClientProtocol41 == 0 {
		t.Errorf("sysbench's capabilities %#x: want CLIENT_PROTOCOL_41 and no CLIENT_DEPRECATE_EOF", r.Caps)
	}
	if _, ok := ParseHandshakeResponse(unhex(t, "0000")); ok {
		t.Error("two bytes read as a handshake response")
	}
	if _, ok := ParseHandshakeResponse(unhex(t, "85a4ffffff726f6f7400")); ok { // HandshakeResponse320: no CLIENT_PROTOCOL_41
		t.Error("a pre-4.1 response read as a 4.1 one")
	}
}

// A COM_CHANGE_USER as TestRealServer sends it (MariaDB 10.11 answers it
// with an auth switch request, then OK, and SELECT DATABASE() says test).
func TestParseChangeUser(t *testing.T) {
	change := []byte("\x11root\x00\x00test\x00\x21\x00mysql_native_password\x00")
	if c, ok := ParseChangeUser(change); !ok || c.User != "root" || c.Database != "test" || c.Attributes != nil {
		t.Errorf("got %+v %v", c, ok)
	}
	withAuth := []byte("\x11app\x00\x14" + strings.Repeat("\xaa", 20) + "shop\x00\x2d\x00")
	if c, ok := ParseChangeUser(withAuth); !ok || c.User != "app" || c.Database != "shop" {
		t.Errorf("with an auth response: %+v %v", c, ok)
	}
	// As MySQL Router sends its next client's attributes on a shared connection.
	attrs := "\x0cprogram_name\x08router-1\x0c_client_port\x0534286"
	withAttrs := []byte("\x11app\x00\x00shop\x00\xff\x00caching_sha2_password\x00" + string(rune(len(attrs))) + attrs)
	if c, ok := ParseChangeUser(withAttrs); !ok || c.Attributes[ProgramName] != "router-1" || c.Attributes[RoutedClientPort] != "34286" {
		t.Errorf("with attributes: %+v %v", c, ok)
	}
	for _, bad := range [][]byte{nil, []byte("\x03SELECT 1"), change[:9], []byte("\x11root\x00\x20abc")} {
		if c, ok := ParseChangeUser(bad); ok {
			t.Errorf("ParseChangeUser(%q) = %+v, want not ok", bad, c)
		}
	}
}

func TestParseGreeting(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		want Greeting
	}{
		{"plain", capGreeting, Greeting{ProtocolVersion: 10, ServerVersion: "10.11.19-MariaDB-0+deb12u1", ConnectionID: 6, Caps: 0x81fff7fe, MariaDBCaps: 0x1d}},
		{"TLS offered", capGreetingSSL, Greeting{ProtocolVersion: 10, ServerVersion: "10.11.19-MariaDB-0+deb12u1", ConnectionID: 3, Caps: 0x81fffffe, MariaDBCaps: 0x1d}},
		{"cut after the connection id", capGreeting[:2*42], Greeting{ProtocolVersion: 10, ServerVersion: "10.11.19-MariaDB-0+deb12u1", ConnectionID: 6, Truncated: true}},
	} {
		got, ok := ParseGreeting(unhex(t, c.in))
		if !ok || got != c.want {
			t.Errorf("%s: got %+v %v, want %+v", c.name, got, ok, c.want)
		}
	}
	g, _ := ParseGreeting(unhex(t, capGreetingSSL))
	if g.Caps&ClientSSL == 0 || g.Caps&ClientDeprecateEOF == 0 || g.Caps&ClientQueryAttributes != 0 {
		t.Errorf("MariaDB 10.11 offers %#x: want CLIENT_SSL and CLIENT_DEPRECATE_EOF, no query attributes", g.Caps)
	}
	// "Too many connections", sent instead of a greeting.
	if _, ok := ParseGreeting(unhex(t, "ff1004546f6f206d616e7920636f6e6e656374696f6e73")); ok {
		t.Error("an error packet read as a greeting")
	}
	// MySQL's own: no prefix to remove, CLIENT_MYSQL set, no MariaDB capabilities.
	mysql := unhex(t, "0a382e302e333600"+"0b000000"+"0102030405060708"+"00"+"ffff"+"ff"+"0200"+"ffdf"+"15"+"00000000000000000000")
	if g, ok := ParseGreeting(mysql); !ok || g.ServerVersion != "8.0.36" || g.ConnectionID != 11 || g.Caps != 0xdfffffff || g.MariaDBCaps != 0 || g.Truncated {
		t.Errorf("MySQL's greeting: %+v %v", g, ok)
	}
}

func TestParsePrepareOK(t *testing.T) {
	got, ok := ParsePrepareOK(unhex(t, capPrepareOK))
	if want := (PrepareOK{StmtID: 3, Columns: 1, Params: 1}); !ok || got != want {
		t.Errorf("got %+v %v, want %+v", got, ok, want)
	}
	// ERR 1146: Table 'sbtest.nope' doesn't exist.
	if _, ok := ParsePrepareOK(unhex(t, "ff7a042334325330325461626c65")); ok {
		t.Error("an error read as a prepare's OK")
	}
}

func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{capQuerySelect, capPrepare, capExecuteTypes, capExecuteInsert, capClose, docQueryAttrs, capSysbenchResponse, capGreeting} {
		f.Add(unhex(f, s), uint32(0))
		f.Add(unhex(f, s), uint32(ClientQueryAttributes))
	}
	f.Fuzz(func(t *testing.T, b []byte, caps uint32) {
		for _, c := range []Command{must(ParseCommand(b)), must(ParseCommandCaps(b, caps))} {
			if len(c.Text) > len(b) {
				t.Fatalf("%d bytes of text from %d bytes", len(c.Text), len(b))
			}
		}
		ParseHandshakeResponse(b)
		ParseChangeUser(b)
		ParseGreeting(b)
		ParsePrepareOK(b)
	})
}

func must(c Command, _ bool) Command { return c }
