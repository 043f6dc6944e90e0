package main

// PostgreSQL 18's and 19's asynchronous I/O with io_method=worker (their default):
// reads I/O worker processes perform for a query are charged to it, marked
// as done for it, and its wait for them is its own box.

import (
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/dbiolat/dbiolat/internal/pgsandbox"
)

// A cold scan on 18 and 19 with I/O workers: the blocks the query read, those
// the workers read for it included, are the buffers EXPLAIN says it read;
// most were the workers'; the block requests they caused are the query's;
// its wait for them is async I/O wait; and the workers' own rows show the
// same reads as theirs.
func TestIOWorkerReadsAreTheQuerys(t *testing.T) {
	for _, v := range ioWorkerVersions {
		t.Run("pg"+v, func(t *testing.T) {
			checkIOWorkerReads(t, startVersion(t, v, map[string]string{"io_method": "worker"}))
		})
	}
}

func checkIOWorkerReads(t *testing.T, c *pgsandbox.Cluster) {
	makeBigTable(t, c)
	pid := fmt.Sprint(c.PostmasterPID())
	slow := startTrace(t, "slowlog", "--fs", "--json", "--min-query", "0", "--pid", pid)
	iops := startTrace(t, "iops", "--json", "--pid", pid, "0.5")
	dropCaches(t)
	plan := psql(t, c, "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) SELECT count(*) FROM big WHERE id >= 0")
	queries, _, sum := slow.stop(t)
	_, intervals, _ := iops.stop(t)
	m := sharedReadRe.FindStringSubmatch(plan)
	io := ioTimingRe.FindStringSubmatch(plan)
	if m == nil || io == nil {
		t.Fatalf("no buffer counts or I/O timing in the plan:\n%s", plan)
	}
	pgBlocks, _ := strconv.ParseUint(m[1], 10, 64)
	pgMs, _ := strconv.ParseFloat(io[1], 64)
	q := only(t, queries, "EXPLAIN", 1)[0]
	var workerBytes float64
	for _, iv := range intervals {
		for _, r := range iv.Rates {
			if r.Layer == "fs" && r.Role == "io worker" {
				workerBytes += r.ReadBytes * iv.Seconds
			}
		}
	}
	workerBytes = math.Round(workerBytes) // rates times seconds: whole bytes, less float rounding
	t.Logf("PostgreSQL read %d buffers, I/O time %.1f ms; the query: %d blocks in %d reads (%.1f ms), of which I/O workers %d I/Os, %d blocks (%.1f ms); blk %d requests %d blocks; aio wait %.1f ms, io wait %.1f ms, cpu %.1f ms, query %.1f ms; waits %v; io worker rows %.0f blocks; drops %v",
		pgBlocks, pgMs, q.FSReadBytes/8192, q.FSReadCount, ms(q.FSReadNs), q.AIOReadCount, q.AIOReadBytes/8192, ms(q.AIOReadNs),
		q.BlkCount, q.BlkBytes/8192, ms(q.AIOWaitNs), ms(q.IOWaitNs), ms(q.CPUNs), ms(q.QueryNs), q.Waits, workerBytes/8192, sum.Drops)

	blocks, byWorkers := q.FSReadBytes/8192, q.AIOReadBytes/8192
	if d := int64(blocks) - int64(pgBlocks); d < -int64(pgBlocks)/50 || d > int64(pgBlocks)/50 {
		t.Errorf("the query read %d blocks, workers' included; PostgreSQL read %d buffers (want within 2%%)", blocks, pgBlocks)
	}
	// Most of a cold scan's reads go to the workers (a backend reads
	// itself only when the queue is full, or a single block).
	if byWorkers > blocks || byWorkers < pgBlocks/2 {
		t.Errorf("I/O workers read %d of the query's %d blocks, want most of them", byWorkers, blocks)
	}
	if q.BlkBytes < q.FSReadBytes*9/10 {
		t.Errorf("the block requests charged to the query read %d bytes of the %d it read from a cold cache", q.BlkBytes, q.FSReadBytes)
	}
	// PostgreSQL's I/O time is its wait for the workers plus, before it,
	// staging and submitting each read (a handle, the buffers' locks, the
	// queue, a signal waking a worker), which we count as the backend's
	// CPU. So the wait lies inside PostgreSQL's time (10% and 1 ms for
	// clock and rounding), and the rest of PostgreSQL's time is CPU: no
	// more than the query's CPU, run-queue wait and synchronous reads. On
	// this 2-CPU VM that rest was 29-47% of the query's CPU, growing when
	// the machine was slow that minute, so only its bound is asserted.
	if q.Waits["IO/AioIoCompletion"] != q.AIOWaitNs {
		t.Errorf("async I/O wait %.1f ms is not the IO/AioIoCompletion wait %.1f ms", ms(q.AIOWaitNs), ms(q.Waits["IO/AioIoCompletion"]))
	}
	if wait := ms(q.AIOWaitNs); wait > 1.1*pgMs+1 {
		t.Errorf("async I/O wait %.1f ms is more than PostgreSQL's I/O time %.1f ms", wait, pgMs)
	}
	if rest, bound := pgMs-ms(q.AIOWaitNs), 1.1*ms(q.CPUNs+q.RunqNs+q.IOWaitNs); rest > bound {
		t.Errorf("PostgreSQL's I/O time %.1f ms exceeds the async I/O wait %.1f ms by %.1f ms, more than the query's CPU, run-queue and I/O wait (%.1f ms with 10%%)",
			pgMs, ms(q.AIOWaitNs), rest, bound)
	}
	// The workers' own rows show the reads as theirs, once: what they read
	// for the query, and no more than a little beside it.
	if workerBytes < float64(q.AIOReadBytes) || workerBytes > float64(q.AIOReadBytes)*1.1 {
		t.Errorf("the io worker rows read %.0f bytes, the query had %d read for it", workerBytes, q.AIOReadBytes)
	}
}
