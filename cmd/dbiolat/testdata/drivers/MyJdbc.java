// How JDBC drivers talk to MariaDB (MariaDB Connector/J, and MySQL
// Connector/J for its server-side cursors) and MySQL (MySQL Connector/J),
// one case per run, each on its own table:
//
//   bulk       300 rows by addBatch and executeBatch: one COM_STMT_BULK_EXECUTE
//   pipelined  the same without bulk statements (useBulkStmts=false): 300
//              executions sent one after the other before any reply is read
//   prepared   one server-prepared statement (useServerPrepStmts) run 20 times
//   longdata   a parameter sent as a stream: COM_STMT_SEND_LONG_DATA before
//              the COM_STMT_EXECUTE
//   cursor     a SELECT of 650 rows through a server-side cursor (MySQL
//              Connector/J, useCursorFetch): COM_STMT_EXECUTE opens it, each
//              COM_STMT_FETCH reads 100 rows
//   attributes 10 INSERTs and 10 executions of a server-prepared one, each
//              carrying a query attribute (MySQL Connector/J, MySQL 8.0.23+
//              with its query_attributes component, which the text reads)
//   application  20 runs of "SELECT ? AS app_probe" (the URL names the
//              application: connectionAttributes=program_name:NAME)
//
// Run as `java -cp DRIVER.jar MyJdbc.java URL CASE` (a single-file program:
// no build step); the table's name ends in $DRV_SUFFIX, if set. Prints what
// it ran.
import java.io.ByteArrayInputStream;
import java.sql.*;

public class MyJdbc {
    public static void main(String[] args) throws Exception {
        String url = args[0], c = args[1], table = "drv_" + c + System.getenv().getOrDefault("DRV_SUFFIX", "");
        if (c.equals("pipelined")) url += "&useBulkStmts=false";
        if (c.equals("prepared") || c.equals("longdata") || c.equals("attributes")) url += "&useServerPrepStmts=true";
        try (Connection conn = DriverManager.getConnection(url)) {
            try (Statement s = conn.createStatement()) {
                s.execute("DROP TABLE IF EXISTS " + table);
                s.execute("CREATE TABLE " + table + " (id int, v longtext)");
            }
            String insert = "INSERT INTO " + table + " VALUES (?, ?)";
            switch (c) {
                case "bulk", "pipelined" -> {
                    try (PreparedStatement ps = conn.prepareStatement(insert)) {
                        for (int i = 0; i < 300; i++) {
                            ps.setInt(1, i);
                            ps.setString(2, "row " + i);
                            ps.addBatch();
                        }
                        ps.executeBatch();
                    }
                }
                case "prepared" -> {
                    try (PreparedStatement ps = conn.prepareStatement(insert)) {
                        for (int i = 0; i < 20; i++) {
                            ps.setInt(1, i);
                            ps.setString(2, "row " + i);
                            ps.executeUpdate();
                        }
                    }
                }
                case "longdata" -> {
                    try (PreparedStatement ps = conn.prepareStatement(insert)) {
                        ps.setInt(1, 1);
                        ps.setAsciiStream(2, new ByteArrayInputStream("x".repeat(100000).getBytes()));
                        ps.executeUpdate();
                    }
                }
                case "cursor" -> {
                    try (Statement s = conn.createStatement()) {
                        StringBuilder rows650 = new StringBuilder("INSERT INTO " + table + " VALUES (0, 'row')");
                        for (int i = 1; i < 650; i++) rows650.append(", (").append(i).append(", 'row')");
                        s.execute(rows650.toString());
                    }
                    int rows = 0;
                    try (PreparedStatement ps = conn.prepareStatement("SELECT id, v FROM " + table + " ORDER BY id")) {
                        ps.setFetchSize(100);
                        try (ResultSet rs = ps.executeQuery()) {
                            while (rs.next()) rows++;
                        }
                    }
                    if (rows != 650) throw new IllegalStateException("read " + rows + " rows");
                }
                case "application" -> {
                    try (PreparedStatement ps = conn.prepareStatement("SELECT ? AS app_probe")) {
                        for (int i = 0; i < 20; i++) {
                            ps.setInt(1, i);
                            ps.executeQuery().close();
                        }
                    }
                }
                case "attributes" -> {
                    // MySQL 8.0.23+'s query attributes (MySQL Connector/J's
                    // JdbcStatement.setAttribute, called by reflection so that
                    // this file compiles against any driver), sent in each
                    // COM_QUERY and COM_STMT_EXECUTE ahead of the statement.
                    Class<?> attributed = Class.forName("com.mysql.cj.jdbc.JdbcStatement");
                    java.lang.reflect.Method set = attributed.getMethod("setAttribute", String.class, Object.class),
                            clear = attributed.getMethod("clearAttributes");
                    try (Statement s = conn.createStatement();
                         PreparedStatement ps = conn.prepareStatement(insert)) {
                        for (int i = 0; i < 10; i++) {
                            for (Statement st : new Statement[] {s, ps}) {
                                clear.invoke(st.unwrap(attributed));
                                set.invoke(st.unwrap(attributed), "n", String.valueOf(i));
                            }
                            s.execute("INSERT INTO " + table + " VALUES (" + i + ", mysql_query_attribute_string('n'))");
                            ps.setInt(1, i);
                            ps.setString(2, "row " + i);
                            ps.executeUpdate();
                        }
                    }
                    try (Statement s = conn.createStatement();
                         ResultSet rs = s.executeQuery("SELECT COUNT(*) FROM " + table + " WHERE v = CAST(id AS CHAR)")) {
                        rs.next();
                        if (rs.getInt(1) != 10) throw new IllegalStateException("the server read " + rs.getInt(1) + " of 10 attributes");
                    }
                }
                default -> throw new IllegalArgumentException("unknown case " + c);
            }
        }
        System.out.println(c + " done");
    }
}
