package otlp

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/sqlnorm"
)

// Convention is a query record's field that OpenTelemetry's semantic
// conventions name: exported under their name, not dbiolat's.
type Convention struct {
	JSON string // the query record's JSON field
	Key  string // the attribute
	Text string
}

// Conventions are the query fields exported under the semantic
// conventions' names (database spans, and the Collector's PostgreSQL
// receiver's db.server.query_sample event). The rest are dbiolat's own
// (model.Fields, model.Boxes: dbiolat.<JSON name>).
var Conventions = []Convention{
	{"system", string(semconv.DBSystemNameKey), "postgresql, mariadb or mysql"},
	{"database", string(semconv.DBNamespaceKey), "the database"},
	{"query", string(semconv.DBQuerySummaryKey), "operations and tables of the normalized text: SELECT pgbench_accounts (also the span's name)"},
	{"query", string(semconv.DBQueryTextKey), "the normalized text: literals replaced by $n or ?"},
	{"user", string(semconv.UserNameKey), "the database user (the Collector's query_sample names it so)"},
	{"port", string(semconv.ServerPortKey), "the server's port; server.address is the host's name"},
	{"pid", string(semconv.ProcessPIDKey), "the backend process (a MySQL server's: the server)"},
	{"client_addr", string(semconv.ClientAddressKey), "a TCP client's address (absent over a unix socket); behind a pooler, the client it forwarded the query for"},
	{"client_port", string(semconv.ClientPortKey), "its port"},
	{"queryid", QueryIDKey, "PostgreSQL's query id of the statement, as a decimal string (pg_stat_activity.query_id::text, the Collector's query_sample names it so; its top_query's postgresql.queryid, pg_stat_statements' queryid, is the same number): absent when not known"},
	{"container", "container.id, container.runtime.name, k8s.pod.uid, k8s.namespace.name, k8s.pod.name", "the server's container and pod (absent on the host)"},
}

// QueryIDKey is the attribute of PostgreSQL's query id: the name the
// Collector's PostgreSQL receiver gives it in db.server.query_sample.
const QueryIDKey = "postgresql.query_id"

// Attributes are what a query's log record and span carry: the semantic
// conventions' attributes, then dbiolat's own from the catalog. host
// names the server (server.address): the database runs where dbiolat does.
func Attributes(q *model.Query, host string) []attribute.KeyValue {
	a := make([]attribute.KeyValue, 0, 16+len(model.Fields)+len(model.Boxes))
	a = append(a,
		semconv.DBSystemNameKey.String(q.System),
		semconv.DBNamespaceKey.String(q.Database),
		semconv.DBQuerySummaryKey.String(summary(q)),
		semconv.DBQueryTextKey.String(q.Query), // normalized: serve and slowlog --otlp refuse --raw-sql
		semconv.UserNameKey.String(q.User),
		semconv.ServerAddressKey.String(host),
		semconv.ServerPortKey.Int(q.Port),
		semconv.ProcessPIDKey.Int(q.PID),
	)
	if q.QueryID != 0 {
		a = append(a, attribute.String(QueryIDKey, strconv.FormatInt(q.QueryID, 10)))
	}
	if q.ClientAddr != "" {
		a = append(a, semconv.ClientAddressKey.String(q.ClientAddr), semconv.ClientPortKey.Int(q.ClientPort))
	}
	if c := q.Container; c != nil {
		for _, kv := range []attribute.KeyValue{
			semconv.ContainerIDKey.String(c.ID), semconv.ContainerRuntimeNameKey.String(c.Runtime),
			semconv.K8SPodUIDKey.String(c.PodUID), semconv.K8SNamespaceNameKey.String(c.Namespace), semconv.K8SPodNameKey.String(c.Pod),
		} {
			if kv.Value.AsString() != "" {
				a = append(a, kv)
			}
		}
	}
	for _, f := range model.Fields {
		a = appendField(a, model.OTLPName(f.Name), f.Value(q), f.Optional)
	}
	for _, b := range model.Boxes {
		a = append(a, attribute.Int64(model.OTLPName(b.Name), int64(*b.Of(q))))
	}
	return a
}

// appendField appends a catalog field's value as an attribute; a map
// (waits) as one attribute per key, under name.key.
func appendField(a []attribute.KeyValue, name string, v any, optional bool) []attribute.KeyValue {
	var kv attribute.KeyValue
	switch v := v.(type) {
	case uint64:
		kv = attribute.Int64(name, int64(v))
	case int:
		kv = attribute.Int(name, v)
	case uint32:
		kv = attribute.Int64(name, int64(v))
	case string:
		kv = attribute.String(name, v)
	case bool:
		kv = attribute.Bool(name, v)
	case map[string]uint64:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			a = append(a, attribute.Int64(name+"."+k, int64(v[k])))
		}
		return a
	default:
		panic(fmt.Sprintf("otlp: a catalog field of type %T", v)) // a new type in the catalog: handle it here
	}
	if optional && isZero(kv.Value) {
		return a
	}
	return append(a, kv)
}

func isZero(v attribute.Value) bool {
	switch v.Type() {
	case attribute.INT64:
		return v.AsInt64() == 0
	case attribute.BOOL:
		return !v.AsBool()
	}
	return v.AsString() == ""
}

// summary is the query's db.query.summary, or its system when its text
// names nothing (the conventions' fallback).
func summary(q *model.Query) string {
	if s := sqlnorm.Summary(q.Query); s != "" {
		return s
	}
	if q.System != "" {
		return q.System
	}
	return "query"
}
