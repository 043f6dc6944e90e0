// Package fio runs the storage reference of a bench with fio and reads
// fio's JSON output. The figures are fio's own: nothing is recomputed.
package fio

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/dbiolat/dbiolat/internal/model"
)

// Job is one fio run of the reference.
type Job struct {
	Name    string
	RW      string // fio's rw=: read, randread, randwrite
	IODepth int
	Engine  string // fio's ioengine=
}

// BlockSize is PostgreSQL's page size: the reference reads what it reads.
const BlockSize = 8192

// Reference is the standard set, all with direct I/O, so each 8 KiB
// operation is one block request: sequential read, random read and write
// at queue depth 1 with pread/pwrite (psync), which is what a PostgreSQL
// backend does, and random read at depth 16 with libaio (as the seeds'
// studies ran fio), which is what the device gives in parallel.
//
// At depth 1, psync's completion latency is the whole system call, so it
// holds the block request's time and a little more; libaio's starts after
// io_submit returns, which on a VM already includes the device doorbell,
// so it undercounts the request by that.
var Reference = []Job{
	{"seqread", "read", 1, "psync"},
	{"randread", "randread", 1, "psync"},
	{"randwrite", "randwrite", 1, "psync"},
	{"randread-qd16", "randread", 16, "libaio"},
}

// LayoutArgs are the arguments that write the test file once, fully, so
// that reads hit real blocks (a sparse file would be read as zeros without
// touching the device).
func LayoutArgs(file string, size int64) []string {
	return []string{"--name=layout", "--filename=" + file, "--size=" + strconv.FormatInt(size, 10),
		"--rw=write", "--bs=1M", "--direct=1", "--ioengine=libaio", "--iodepth=4", "--output-format=json"}
}

// Args are the arguments of one timed job on the laid-out file. --thread
// keeps the job in fio's own process, the one a bench traces.
func (j Job) Args(file string, size int64, seconds int) []string {
	return []string{"--name=" + j.Name, "--filename=" + file, "--size=" + strconv.FormatInt(size, 10),
		"--rw=" + j.RW, "--bs=" + strconv.Itoa(BlockSize), "--direct=1", "--ioengine=" + j.Engine,
		"--iodepth=" + strconv.Itoa(j.IODepth), "--runtime=" + strconv.Itoa(seconds), "--time_based",
		"--disk_util=0", // no reads of /sys/block/*/stat among the job's reads
		"--thread", "--output-format=json"}
}

// output is the part of fio's JSON a bench reads.
type output struct {
	Jobs []struct {
		JobName    string `json:"jobname"`
		Error      int    `json:"error"`
		JobRuntime uint64 `json:"job_runtime"` // ms
		Read       side   `json:"read"`
		Write      side   `json:"write"`
	} `json:"jobs"`
}

type side struct {
	IOBytes  uint64  `json:"io_bytes"`
	TotalIOs uint64  `json:"total_ios"`
	IOPS     float64 `json:"iops"`
	BWBytes  float64 `json:"bw_bytes"`
	Clat     struct {
		Mean       float64           `json:"mean"`
		Percentile map[string]uint64 `json:"percentile"`
	} `json:"clat_ns"`
	Lat struct {
		Mean float64 `json:"mean"`
	} `json:"lat_ns"`
}

// Parse reads fio's JSON output of job j into a model.FioJob, keeping the
// output itself beside the figures.
func Parse(j Job, out []byte) (*model.FioJob, error) {
	var o output
	if err := json.Unmarshal(out, &o); err != nil {
		return nil, fmt.Errorf("fio's output is not the JSON expected: %w", err)
	}
	if len(o.Jobs) != 1 {
		return nil, fmt.Errorf("fio reported %d jobs, expected 1", len(o.Jobs))
	}
	r := o.Jobs[0]
	if r.Error != 0 {
		return nil, fmt.Errorf("fio job %s failed with error %d", r.JobName, r.Error)
	}
	if r.Read.TotalIOs+r.Write.TotalIOs == 0 {
		return nil, errors.New("fio did no I/O")
	}
	return &model.FioJob{Type: "fio", Name: j.Name, RW: j.RW, BlockSize: BlockSize, IODepth: j.IODepth, Engine: j.Engine,
		Seconds: float64(r.JobRuntime) / 1000, Read: r.Read.model(), Write: r.Write.model(), FioOutput: out}, nil
}

func (s side) model() model.FioSide {
	return model.FioSide{Ops: s.TotalIOs, Bytes: s.IOBytes, IOPS: s.IOPS, BWBytes: s.BWBytes,
		ClatMeanNs: s.Clat.Mean, ClatP50Ns: s.Clat.Percentile["50.000000"], ClatP99Ns: s.Clat.Percentile["99.000000"],
		LatMeanNs: s.Lat.Mean}
}
