// How Node.js's mysql2 (npm) talks to MySQL and MariaDB, one case per run,
// each on its own table:
//
//   query    30 INSERTs by connection.query: the values quoted in by the
//            driver, a COM_QUERY each
//   execute  30 INSERTs by connection.execute: prepared once on the server
//            (the driver keeps it), a COM_STMT_EXECUTE each
//   multi    one COM_QUERY holding three statements (multipleStatements)
//
// Run as `node my_mysql2.js TARGET CASE USER PASSWORD`, with NODE_PATH
// where mysql2 is installed: TARGET a unix socket's path, or HOST:PORT
// over TLS (the server's own certificate, not verified). The table's name
// ends in $DRV_SUFFIX, if set. Prints what it ran.
const mysql = require("mysql2/promise");

async function main() {
  const [target, c, user, password] = process.argv.slice(2);
  const where = target.startsWith("/")
    ? { socketPath: target }
    : { host: target.split(":")[0], port: Number(target.split(":")[1]), ssl: { rejectUnauthorized: false } };
  const conn = await mysql.createConnection({ ...where, user, password, database: "test", multipleStatements: true });
  if (where.ssl) {
    const [rows] = await conn.query("SHOW SESSION STATUS LIKE 'Ssl_cipher'");
    if (!rows[0].Value) throw new Error("the session is not over TLS");
  }
  const table = "drv_" + c + (process.env.DRV_SUFFIX || "");
  await conn.query(`DROP TABLE IF EXISTS ${table}`);
  await conn.query(`CREATE TABLE ${table} (id int, v varchar(64))`);
  switch (c) {
    case "query":
      for (let i = 0; i < 30; i++) await conn.query(`INSERT INTO ${table} VALUES (?, ?)`, [i, "row " + i]);
      break;
    case "execute":
      for (let i = 0; i < 30; i++) await conn.execute(`INSERT INTO ${table} VALUES (?, ?)`, [i, "row " + i]);
      break;
    case "multi":
      await conn.query(`INSERT INTO ${table} VALUES (1, 'a'); UPDATE ${table} SET v = 'b' WHERE id = 1; DELETE FROM ${table} WHERE id = 2`);
      break;
    default:
      throw new Error("unknown case " + c);
  }
  await conn.end();
  console.log(c, "done");
}

main().catch((e) => {
  console.error(e.message);
  process.exit(1);
});
