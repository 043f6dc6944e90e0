package postgres

import "fmt"

// StatusVariable is the exported variable that points at a backend's
// status entry in shared memory (MyBEEntry, a PgBackendStatus *): what
// pg_stat_activity reads, its query_id among it.
const StatusVariable = "MyBEEntry"

// queryIDOffsets is where st_query_id, the query id of the statement a
// backend runs (or ran last, while idle), lies in PgBackendStatus, by
// major version, for x86-64. Worked out from each version's
// src/include/utils/backend_status.h (the fields before it: three ints,
// four timestamps, two Oids, a SockAddr of 136 bytes, a host name pointer,
// the SSL and GSS flags with their pointers, the state, the application
// name and activity pointers, the progress command, its target and
// PGSTAT_NUM_PROGRESS_PARAM (20) int64s) and checked against the offset
// each version's pgstat_report_query_id writes to, in Debian's 15, 18 and
// 19 and the npm registry's 16 to 18. A version not listed is not guessed:
// its layout may differ, and a wrong offset would name statements by
// another field's value.
var queryIDOffsets = map[int]uint32{
	15: 424,
	16: 424,
	17: 424,
	18: 424,
	19: 424,
}

// DatabaseIDOffset is where PgBackendStatus keeps the backend's database
// (st_databaseid), in every version queryIDOffsets knows: after three ints
// and four timestamps. With the query id it is what pg_stat_statements
// keys a statement by (and its user, which dbiolat leaves out).
const DatabaseIDOffset = 48

// QueryIDOffset is where a major version keeps the current statement's
// query id in its backends' status entry; an error says why it is not
// known (the major version 0: unknown; 13 and older compute none).
func QueryIDOffset(version int) (uint32, error) {
	if off, ok := queryIDOffsets[version]; ok {
		return off, nil
	}
	if version > 0 && version < 14 {
		return 0, fmt.Errorf("PostgreSQL %d computes no query ids (14 is the first)", version)
	}
	return 0, fmt.Errorf("where PostgreSQL %d keeps its query id is not known to this dbiolat (it knows 15 to 19)", version)
}
