// How pgJDBC talks to PostgreSQL, one case per run, each on its own table
// so that pg_stat_statements tells the cases apart:
//
//   batch     3,000 INSERTs by addBatch and one executeBatch: many
//             Bind/Execute before one Sync, over many reads of the server
//   prepared  one PreparedStatement run 20 times: server-prepared (a named
//             statement) from the prepareThreshold'th run on
//   fetch     a SELECT of 650 rows with setFetchSize(100): a portal run
//             with a row limit, resumed by the next Executes
//   application  20 runs of "SELECT ? AS app_probe" (the URL names the
//             application: ApplicationName=)
//   onerow    100 one-row fetches with setMaxRows(1), autocommit: an Execute
//             whose row limit is 1, its portal suspended, dropped at the Sync
//   onerow_tx the same 50 times in one transaction: each new unnamed portal
//             drops the one before, the commit the last
//   onerow_rollback  20 in one transaction, rolled back (the ROLLBACK's own
//             unnamed portal drops the last one first: all are counted)
//   closed    30 result sets of a fetch size of 5 in one transaction, each
//             closed after its first row: named portals suspended, then
//             closed (Close), the last one with the commit
//   open_rollback  10 result sets of a fetch size of 5 in one transaction,
//             each read for one row and left open (pgJDBC closes one when
//             the statement runs again), then a rollback: the server drops
//             the last portal without counting it
//
// Run as `java -cp postgresql.jar PgJdbc.java URL CASE` (a single-file
// program: no build step). Prints what it ran.
import java.sql.*;

public class PgJdbc {
    public static void main(String[] args) throws Exception {
        String url = args[0], c = args[1], table = "drv_" + c;
        try (Connection conn = DriverManager.getConnection(url)) {
            try (Statement s = conn.createStatement()) {
                s.execute("DROP TABLE IF EXISTS " + table);
                s.execute("CREATE TABLE " + table + " (id int, v text)");
            }
            switch (c) {
                case "batch" -> {
                    try (PreparedStatement ps = conn.prepareStatement("INSERT INTO " + table + " VALUES (?, ?)")) {
                        for (int i = 0; i < 3000; i++) {
                            ps.setInt(1, i);
                            ps.setString(2, "row " + i);
                            ps.addBatch();
                        }
                        ps.executeBatch();
                    }
                }
                case "prepared" -> {
                    try (PreparedStatement ps = conn.prepareStatement("INSERT INTO " + table + " VALUES (?, ?)")) {
                        for (int i = 0; i < 20; i++) {
                            ps.setInt(1, i);
                            ps.setString(2, "row " + i);
                            ps.executeUpdate();
                        }
                    }
                }
                case "fetch" -> {
                    try (Statement s = conn.createStatement()) {
                        s.execute("INSERT INTO " + table + " SELECT g, 'row' FROM generate_series(1, 650) g");
                    }
                    conn.setAutoCommit(false); // a fetch size needs a transaction
                    int rows = 0;
                    try (PreparedStatement ps = conn.prepareStatement("SELECT id, v FROM " + table + " ORDER BY id")) {
                        ps.setFetchSize(100);
                        try (ResultSet rs = ps.executeQuery()) {
                            while (rs.next()) rows++;
                        }
                    }
                    conn.commit();
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
                case "onerow", "onerow_tx", "onerow_rollback" -> {
                    try (Statement s = conn.createStatement()) {
                        s.execute("INSERT INTO " + table + " SELECT g, 'row' FROM generate_series(1, 10) g");
                    }
                    int n = switch (c) { case "onerow" -> 100; case "onerow_tx" -> 50; default -> 20; };
                    conn.setAutoCommit(c.equals("onerow"));
                    try (PreparedStatement ps = conn.prepareStatement("SELECT id, v FROM " + table + " WHERE id > ? ORDER BY id")) {
                        ps.setMaxRows(1);
                        for (int i = 0; i < n; i++) {
                            ps.setInt(1, i % 5);
                            try (ResultSet rs = ps.executeQuery()) {
                                if (!rs.next()) throw new IllegalStateException("no row");
                            }
                        }
                    }
                    if (c.equals("onerow_tx")) conn.commit();
                    if (c.equals("onerow_rollback")) conn.rollback();
                }
                case "closed" -> {
                    try (Statement s = conn.createStatement()) {
                        s.execute("INSERT INTO " + table + " SELECT g, 'row' FROM generate_series(1, 50) g");
                    }
                    conn.setAutoCommit(false); // a fetch size needs a transaction
                    try (PreparedStatement ps = conn.prepareStatement("SELECT id, v FROM " + table + " WHERE id > ? ORDER BY id")) {
                        ps.setFetchSize(5);
                        for (int i = 0; i < 30; i++) {
                            ps.setInt(1, i);
                            try (ResultSet rs = ps.executeQuery()) {
                                if (!rs.next()) throw new IllegalStateException("no row");
                            }
                        }
                    }
                    conn.commit();
                }
                case "open_rollback" -> {
                    try (Statement s = conn.createStatement()) {
                        s.execute("INSERT INTO " + table + " SELECT g, 'row' FROM generate_series(1, 50) g");
                    }
                    conn.setAutoCommit(false);
                    java.util.List<ResultSet> open = new java.util.ArrayList<>();
                    try (PreparedStatement ps = conn.prepareStatement("SELECT id, v FROM " + table + " WHERE id > ? ORDER BY id")) {
                        ps.setFetchSize(5);
                        for (int i = 0; i < 10; i++) {
                            ps.setInt(1, i);
                            ResultSet rs = ps.executeQuery();
                            if (!rs.next()) throw new IllegalStateException("no row");
                            open.add(rs);
                        }
                        conn.rollback();
                    }
                }
                default -> throw new IllegalArgumentException("unknown case " + c);
            }
        }
        System.out.println(c + " done");
    }
}
