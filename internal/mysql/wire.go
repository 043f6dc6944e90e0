package mysql

import (
	"bytes"
	"encoding/binary"
	"strings"
)

// The client/server protocol, as far as dbiolat reads it: which command a
// client sent, who it is, what the server said it is. The kernel copies
// the payload of the packet that starts a command (after its 4-byte
// header: 3 bytes of length, 1 of sequence; payload[0] is the command
// byte), at most 4095 bytes of it; this reads them.
//
// References: MariaDB's "Client/Server Protocol" pages and MySQL's
// source documentation ("Client/Server Protocol"); the tests hold packets
// captured from MariaDB 10.11 serving its client and sysbench.

// Command codes: the first byte of a command's payload. They are shared by
// MySQL and MariaDB up to 0x1d; 0x1e is MySQL's binlog dump by GTID (not
// implemented by MariaDB), 0x20 and 0x21 are MySQL's only, 0xfa-0xfd
// MariaDB's only.
const (
	ComSleep            byte = 0x00 // the server's own state, never sent
	ComQuit             byte = 0x01
	ComInitDB           byte = 0x02 // USE db
	ComQuery            byte = 0x03
	ComFieldList        byte = 0x04 // deprecated: SHOW COLUMNS
	ComCreateDB         byte = 0x05
	ComDropDB           byte = 0x06
	ComRefresh          byte = 0x07
	ComShutdown         byte = 0x08
	ComStatistics       byte = 0x09
	ComProcessInfo      byte = 0x0a
	ComConnect          byte = 0x0b // the server's own state, never sent
	ComProcessKill      byte = 0x0c
	ComDebug            byte = 0x0d
	ComPing             byte = 0x0e
	ComTime             byte = 0x0f
	ComDelayedInsert    byte = 0x10
	ComChangeUser       byte = 0x11
	ComBinlogDump       byte = 0x12
	ComTableDump        byte = 0x13
	ComConnectOut       byte = 0x14
	ComRegisterSlave    byte = 0x15
	ComStmtPrepare      byte = 0x16
	ComStmtExecute      byte = 0x17
	ComStmtSendLongData byte = 0x18
	ComStmtClose        byte = 0x19 // the server does not reply
	ComStmtReset        byte = 0x1a
	ComSetOption        byte = 0x1b
	ComStmtFetch        byte = 0x1c
	ComDaemon           byte = 0x1d
	ComBinlogDumpGTID   byte = 0x1e // MySQL
	ComResetConnection  byte = 0x1f
	ComClone            byte = 0x20 // MySQL 8.0.17+
	ComSubscribeGR      byte = 0x21 // MySQL: COM_SUBSCRIBE_GROUP_REPLICATION_STREAM
	ComStmtBulkExecute  byte = 0xfa // MariaDB 10.2+
	ComSlaveWorker      byte = 0xfb // MariaDB: its replication threads' own states
	ComSlaveIO          byte = 0xfc
	ComSlaveSQL         byte = 0xfd
)

var commandNames = map[byte]string{
	ComSleep: "COM_SLEEP", ComQuit: "COM_QUIT", ComInitDB: "COM_INIT_DB", ComQuery: "COM_QUERY",
	ComFieldList: "COM_FIELD_LIST", ComCreateDB: "COM_CREATE_DB", ComDropDB: "COM_DROP_DB",
	ComRefresh: "COM_REFRESH", ComShutdown: "COM_SHUTDOWN", ComStatistics: "COM_STATISTICS",
	ComProcessInfo: "COM_PROCESS_INFO", ComConnect: "COM_CONNECT", ComProcessKill: "COM_PROCESS_KILL",
	ComDebug: "COM_DEBUG", ComPing: "COM_PING", ComTime: "COM_TIME", ComDelayedInsert: "COM_DELAYED_INSERT",
	ComChangeUser: "COM_CHANGE_USER", ComBinlogDump: "COM_BINLOG_DUMP", ComTableDump: "COM_TABLE_DUMP",
	ComConnectOut: "COM_CONNECT_OUT", ComRegisterSlave: "COM_REGISTER_SLAVE",
	ComStmtPrepare: "COM_STMT_PREPARE", ComStmtExecute: "COM_STMT_EXECUTE",
	ComStmtSendLongData: "COM_STMT_SEND_LONG_DATA", ComStmtClose: "COM_STMT_CLOSE",
	ComStmtReset: "COM_STMT_RESET", ComSetOption: "COM_SET_OPTION", ComStmtFetch: "COM_STMT_FETCH",
	ComDaemon: "COM_DAEMON", ComBinlogDumpGTID: "COM_BINLOG_DUMP_GTID",
	ComResetConnection: "COM_RESET_CONNECTION", ComClone: "COM_CLONE",
	ComSubscribeGR: "COM_SUBSCRIBE_GROUP_REPLICATION_STREAM", ComStmtBulkExecute: "COM_STMT_BULK_EXECUTE",
	ComSlaveWorker: "COM_SLAVE_WORKER", ComSlaveIO: "COM_SLAVE_IO", ComSlaveSQL: "COM_SLAVE_SQL",
}

// CommandName is a command code's protocol name ("COM_QUERY"); "" for a
// byte that is no command.
func CommandName(code byte) string { return commandNames[code] }

// Capability flags (the 32 bits both sides exchange in the handshake).
// Bit 0 is CLIENT_LONG_PASSWORD to MySQL; a MariaDB server clears it
// (naming it CLIENT_MYSQL) to say its handshake carries 32 more bits of
// MariaDB's own (MariaDBCaps).
const (
	ClientMySQL                = 1 << 0
	ClientConnectWithDB        = 1 << 3
	ClientCompress             = 1 << 5 // the packets that follow the handshake are compressed
	ClientProtocol41           = 1 << 9
	ClientSSL                  = 1 << 11 // the client switches to TLS after its SSLRequest
	ClientSecureConnection     = 1 << 15
	ClientMultiStatements      = 1 << 16
	ClientMultiResults         = 1 << 17
	ClientPSMultiResults       = 1 << 18
	ClientPluginAuth           = 1 << 19
	ClientConnectAttrs         = 1 << 20
	ClientPluginAuthLenencData = 1 << 21
	ClientSessionTrack         = 1 << 23
	ClientDeprecateEOF         = 1 << 24 // OK packets end result sets instead of EOF packets
	ClientZstdCompression      = 1 << 26 // MySQL 8.0.18+
	ClientQueryAttributes      = 1 << 27 // MySQL 8.0.23+: COM_QUERY carries parameters before its text
)

// MariaDB's extended capabilities (HandshakeResponse.MariaDBCaps, bits 32
// and up of its capabilities, shifted down).
const (
	MariaDBProgress         = 1 << 0
	MariaDBStmtBulkOps      = 1 << 2 // COM_STMT_BULK_EXECUTE
	MariaDBExtendedMetadata = 1 << 3
	MariaDBCacheMetadata    = 1 << 4 // result sets say whether column definitions follow; executes' do not repeat the prepare's
	MariaDBBulkUnitResults  = 1 << 5
)

// mariadbCapsAt is where a HandshakeResponse41 carries MariaDB's extended
// capabilities: the last 4 of its 23 filler bytes.
const mariadbCapsAt = 28

// StmtLast is the statement id MariaDB (10.2+) reads as "the statement
// this connection prepared last": a client sends COM_STMT_PREPARE and a
// COM_STMT_EXECUTE of id -1 without waiting for the prepare's reply.
const StmtLast = 0xffffffff

// Command is what a command packet asks.
type Command struct {
	Code byte
	Name string // "COM_QUERY"
	// Text is the statement of a COM_QUERY or COM_STMT_PREPARE, the
	// database of a COM_INIT_DB (COM_CREATE_DB, COM_DROP_DB), the table of
	// a COM_FIELD_LIST.
	Text string
	// StmtID is the prepared statement a COM_STMT_EXECUTE, _FETCH, _CLOSE,
	// _RESET, _SEND_LONG_DATA or MariaDB's _BULK_EXECUTE names.
	StmtID uint32
	// Truncated says the payload ended inside a field its layout needs
	// (Text is what there was). A statement's text runs to the end of the
	// payload, so a text cut by the capture is only known to its caller
	// (the kernel's record says so): it sets Truncated itself.
	Truncated bool
}

// ParseCommand reads a command packet's payload without the connection's
// capabilities. A COM_QUERY whose bytes read as MySQL's query attributes
// (CLIENT_QUERY_ATTRIBUTES) is read as carrying them: a parameter count,
// then 0x01 (one parameter set), then the parameters, then the text. No
// statement starts with a byte and then 0x01, so the guess only costs a
// statement whose attributes do not parse: its payload is then read as
// the text. ParseCommandCaps reads by the capabilities instead.
// ok is false for an empty payload or a byte that is no command.
func ParseCommand(payload []byte) (Command, bool) {
	return parseCommand(payload, 0, true)
}

// ParseCommandCaps reads a command packet's payload on a connection whose
// negotiated capabilities are caps: the greeting's and the handshake
// response's, and-ed (the clients captured for the tests asked only for
// what the server offered, so the response's alone did). It reads query
// attributes only if caps has ClientQueryAttributes.
func ParseCommandCaps(payload []byte, caps uint32) (Command, bool) {
	return parseCommand(payload, caps, false)
}

func parseCommand(payload []byte, caps uint32, guess bool) (Command, bool) {
	if len(payload) == 0 {
		return Command{}, false
	}
	c := Command{Code: payload[0], Name: commandNames[payload[0]]}
	if c.Name == "" {
		return c, false
	}
	r := reader{b: payload[1:]}
	switch c.Code {
	case ComQuery:
		switch {
		case caps&ClientQueryAttributes != 0:
			rest, ok := skipQueryAttributes(payload[1:])
			c.Text, c.Truncated = string(rest), !ok
		case guess && len(payload) >= 3 && payload[2] == 1 && payload[1] < 0xfb:
			if rest, ok := skipQueryAttributes(payload[1:]); ok {
				c.Text = string(rest)
			} else {
				c.Text = string(payload[1:])
			}
		default:
			c.Text = string(payload[1:])
		}
	case ComStmtPrepare, ComInitDB, ComCreateDB, ComDropDB:
		c.Text = string(payload[1:])
	case ComFieldList:
		c.Text = r.nulString()
		c.Truncated = r.short
	case ComStmtExecute, ComStmtFetch, ComStmtClose, ComStmtReset, ComStmtSendLongData, ComStmtBulkExecute:
		c.StmtID = r.u32()
		c.Truncated = r.short
	}
	return c, true
}

// skipQueryAttributes reads past a COM_QUERY's query attributes (MySQL
// 8.0.23+) to its text:
//
//	int<lenenc> parameter_count, int<lenenc> parameter_set_count (1)
//	if parameter_count > 0:
//	  null bitmap (count+7)/8 bytes, new_params_bind_flag (always 1),
//	  per parameter: int<2> type and flag, string<lenenc> name,
//	  per parameter not null: its value in the binary protocol
//	string<EOF> query
//
// ok is false if the bytes end early or are not this layout.
func skipQueryAttributes(b []byte) (text []byte, ok bool) {
	r := reader{b: b}
	n := r.lenenc()
	r.lenenc() // parameter sets: always 1
	if r.short || n > uint64(len(r.b)) {
		return nil, false // each parameter takes at least a byte: not attributes
	}
	if n == 0 {
		return r.b, true
	}
	null := r.bytes(int(n+7) / 8)
	if r.u8() != 1 || r.short {
		return nil, false // the types must be sent, or the values cannot be skipped
	}
	types := make([]byte, n)
	for i := range types {
		types[i] = byte(r.u16())
		r.lenencBytes() // the name
	}
	for i, t := range types {
		if r.short {
			break
		}
		if null[i/8]&(1<<(i%8)) != 0 {
			continue
		}
		if !r.skipValue(t) {
			return nil, false
		}
	}
	if r.short {
		return nil, false
	}
	return r.b, true
}

// skipValue reads past one value of a column type in the binary protocol.
func (r *reader) skipValue(typ byte) bool {
	switch typ {
	case 0x06: // NULL
	case 0x01: // TINY
		r.bytes(1)
	case 0x02, 0x0d: // SHORT, YEAR
		r.bytes(2)
	case 0x03, 0x04, 0x09: // LONG, FLOAT, INT24
		r.bytes(4)
	case 0x05, 0x08: // DOUBLE, LONGLONG
		r.bytes(8)
	case 0x07, 0x0a, 0x0b, 0x0c, 0x0e, 0x11, 0x12, 0x13: // dates and times: a length byte, then that many
		r.bytes(int(r.u8()))
	case 0x00, 0x0f, 0x10, 0xf2, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff: // strings, blobs, decimals, JSON
		r.lenencBytes()
	default:
		return false
	}
	return true
}

// HandshakeResponse is the client's answer to the server's greeting: the
// first packet a client sends (HandshakeResponse41), or the SSLRequest
// that precedes it on a TLS connection.
type HandshakeResponse struct {
	Caps        uint32 // the capabilities the client asks for
	MariaDBCaps uint32 // MariaDB's extended ones, when Caps lacks ClientMySQL
	User        string
	Database    string // with ClientConnectWithDB
	// Attributes are the connection attributes the client sent (with
	// ClientConnectAttrs): "_client_name", "_pid", "program_name"...
	Attributes map[string]string
	// SSLRequest: the 32-byte short form with ClientSSL. The client starts
	// TLS next: the connection's commands cannot be read from its bytes.
	SSLRequest bool
	Truncated  bool
}

// ParseHandshakeResponse reads a HandshakeResponse41 or an SSLRequest:
//
//	int<4> capabilities, int<4> max packet size, int<1> character set,
//	23 bytes of filler (MariaDB: the last 4 are its capabilities),
//	string<NUL> user, auth response (string<lenenc> with
//	ClientPluginAuthLenencData, else int<1> length and data with
//	ClientSecureConnection, else string<NUL>),
//	string<NUL> database with ClientConnectWithDB, string<NUL> auth
//	plugin name with ClientPluginAuth, then with ClientConnectAttrs
//	int<lenenc> the attributes' length and that many bytes of
//	string<lenenc> key, string<lenenc> value pairs.
//
// ok is false for what is not one: too short for the capabilities, or
// the pre-4.1 response (no server dbiolat traces accepts it).
func ParseHandshakeResponse(payload []byte) (HandshakeResponse, bool) {
	var h HandshakeResponse
	r := reader{b: payload}
	h.Caps = r.u32()
	if r.short || h.Caps&ClientProtocol41 == 0 {
		return h, false
	}
	if len(payload) < 32 {
		h.Truncated = true
		return h, true
	}
	if h.Caps&ClientMySQL == 0 {
		h.MariaDBCaps = binary.LittleEndian.Uint32(payload[mariadbCapsAt:])
	}
	if len(payload) == 32 {
		h.SSLRequest = h.Caps&ClientSSL != 0
		h.Truncated = !h.SSLRequest
		return h, true
	}
	r = reader{b: payload[32:]}
	h.User = r.nulString()
	switch {
	case h.Caps&ClientPluginAuthLenencData != 0:
		r.lenencBytes()
	case h.Caps&ClientSecureConnection != 0:
		r.bytes(int(r.u8()))
	default:
		r.nulString()
	}
	if h.Caps&ClientConnectWithDB != 0 {
		h.Database = r.nulString()
	}
	if h.Caps&ClientPluginAuth != 0 {
		r.nulString()
	}
	if h.Caps&ClientConnectAttrs != 0 && !r.short {
		h.Attributes = readAttributes(&r)
	}
	h.Truncated = r.short
	return h, true
}

// ProgramName is the attribute that names the application: the mysql
// client, MariaDB Connector/J (connectionAttributes=program_name:NAME)
// and PyMySQL (program_name=NAME) set it.
const ProgramName = "program_name"

// The client's address and port, as MySQL Router ending the client's TLS
// adds them to the attributes it sends on for a server connection it
// opens for that client.
const (
	RoutedClientIP   = "_client_ip"
	RoutedClientPort = "_client_port"
)

// maxAttributes bounds the attributes read from one handshake: the
// kernel copies at most 4 KiB of it, so this only guards against a
// client that sends thousands of empty ones.
const maxAttributes = 64

// readAttributes reads connection attributes: int<lenenc> their length,
// then key and value pairs of string<lenenc>, as far as the bytes go.
func readAttributes(r *reader) map[string]string {
	n := r.lenenc()
	if r.short {
		return nil
	}
	a := reader{b: r.bytes(int(min(n, uint64(len(r.b)))))}
	out := map[string]string{}
	for len(a.b) > 0 && len(out) < maxAttributes {
		k := a.lenencBytes()
		v := a.lenencBytes()
		if a.short {
			r.short = true // cut: the pair is not whole
			break
		}
		out[string(k)] = string(v)
	}
	return out
}

// ChangeUser is what a COM_CHANGE_USER switches its connection to.
type ChangeUser struct {
	User, Database string
	// Attributes are the connection attributes it sends, if any (MySQL
	// Router sends its next client's, when it hands a shared server
	// connection to that client).
	Attributes map[string]string
}

// ParseChangeUser reads a COM_CHANGE_USER (its payload, command byte
// included): the user and database the connection switches to, and the
// attributes it sends.
//
//	int<1> 0x11, string<NUL> user, int<1> length and auth response,
//	string<NUL> database, then int<2> character set, string<NUL> auth
//	plugin, and (CLIENT_CONNECT_ATTRS) the attributes
//
// The length-prefixed auth response is CLIENT_SECURE_CONNECTION's, which
// every 4.1 client and server has. ok is false for another command or
// bytes that end before the database does.
func ParseChangeUser(payload []byte) (ChangeUser, bool) {
	var c ChangeUser
	if len(payload) == 0 || payload[0] != ComChangeUser {
		return c, false
	}
	r := reader{b: payload[1:]}
	c.User = r.nulString()
	r.bytes(int(r.u8()))
	if r.short || bytes.IndexByte(r.b, 0) < 0 {
		return c, false
	}
	c.Database = r.nulString()
	r.bytes(2) // character set
	if bytes.IndexByte(r.b, 0) >= 0 {
		r.nulString() // auth plugin
		if len(r.b) > 0 {
			c.Attributes = readAttributes(&r)
		}
	}
	return c, true
}

// Greeting is the server's first packet on a connection (Initial
// Handshake, protocol version 10).
type Greeting struct {
	ProtocolVersion byte // 10
	// ServerVersion as the server sends it, less the "5.5.5-" that MariaDB
	// 10 and 11 put before theirs (for replicas older than 10 that would
	// otherwise take it for a 5.x): "10.11.19-MariaDB-0+deb12u1".
	ServerVersion string
	ConnectionID  uint32 // the server's id for the connection: SHOW PROCESSLIST's, CONNECTION_ID()
	Caps          uint32
	MariaDBCaps   uint32 // when Caps lacks ClientMySQL
	Truncated     bool
}

// ParseGreeting reads an Initial Handshake packet:
//
//	int<1> protocol version (10), string<NUL> server version,
//	int<4> connection id, 8 bytes of auth data, 1 byte of filler,
//	int<2> capabilities (low), int<1> character set, int<2> status,
//	int<2> capabilities (high), int<1> auth data length,
//	10 bytes reserved (MariaDB: 6, then its capabilities), …
//
// ok is false for anything else, such as the error packet (0xff) a server
// sends instead when it refuses the connection.
func ParseGreeting(payload []byte) (Greeting, bool) {
	var g Greeting
	r := reader{b: payload}
	g.ProtocolVersion = r.u8()
	if r.short || g.ProtocolVersion != 10 {
		return g, false
	}
	v := r.nulString()
	if rest, ok := strings.CutPrefix(v, "5.5.5-"); ok && rest != "" && rest[0] >= '0' && rest[0] <= '9' {
		v = rest
	}
	g.ServerVersion = v
	g.ConnectionID = r.u32()
	r.bytes(8 + 1)
	g.Caps = uint32(r.u16())
	r.bytes(1 + 2)
	g.Caps |= uint32(r.u16()) << 16
	r.bytes(1 + 6)
	ext := r.u32()
	if g.Caps&ClientMySQL == 0 {
		g.MariaDBCaps = ext
	}
	g.Truncated = r.short
	return g, true
}

// PrepareOK is the first packet of the server's reply to a
// COM_STMT_PREPARE that succeeded; column and parameter definitions
// follow it.
type PrepareOK struct {
	StmtID  uint32
	Columns uint16
	Params  uint16
}

// ParsePrepareOK reads a COM_STMT_PREPARE_OK packet:
//
//	int<1> 0x00, int<4> statement id, int<2> columns, int<2> parameters,
//	int<1> 0x00, int<2> warnings (and MariaDB and MySQL may add more).
//
// ok is false for an error packet (0xff) or a payload too short.
func ParsePrepareOK(payload []byte) (PrepareOK, bool) {
	if len(payload) < 9 || payload[0] != 0 {
		return PrepareOK{}, false
	}
	le := binary.LittleEndian
	return PrepareOK{StmtID: le.Uint32(payload[1:]), Columns: le.Uint16(payload[5:]), Params: le.Uint16(payload[7:])}, true
}

// reader reads the protocol's little-endian fields; past the end it
// returns zeros and says so in short, so that a parse can go as far as
// the bytes go and no read can fail.
type reader struct {
	b     []byte
	short bool
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || n > len(r.b) {
		out := r.b
		r.b, r.short = nil, true
		return out
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() byte {
	b := r.bytes(1)
	if len(b) < 1 {
		return 0
	}
	return b[0]
}

func (r *reader) u16() uint16 {
	b := r.bytes(2)
	if len(b) < 2 {
		return 0
	}
	return binary.LittleEndian.Uint16(b)
}

func (r *reader) u32() uint32 {
	b := r.bytes(4)
	if len(b) < 4 {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

// lenenc reads a length-encoded integer: one byte below 0xfb, or 0xfc,
// 0xfd, 0xfe followed by 2, 3 or 8 bytes. 0xfb and 0xff are not integers.
func (r *reader) lenenc() uint64 {
	first := r.u8()
	var n int
	switch {
	case first < 0xfb:
		return uint64(first)
	case first == 0xfc:
		n = 2
	case first == 0xfd:
		n = 3
	case first == 0xfe:
		n = 8
	default:
		r.short = true
		return 0
	}
	b := r.bytes(n)
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

func (r *reader) lenencBytes() []byte {
	n := r.lenenc()
	if n > uint64(len(r.b)) {
		return r.bytes(-1)
	}
	return r.bytes(int(n))
}

// nulString reads a NUL-terminated string; without its NUL, what is left.
func (r *reader) nulString() string {
	i := bytes.IndexByte(r.b, 0)
	if i < 0 {
		return string(r.bytes(-1))
	}
	s := string(r.b[:i])
	r.b = r.b[i+1:]
	return s
}
