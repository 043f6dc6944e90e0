package main

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

// otlpSink stands for a collector in serve --otlp's measurements: it
// takes OTLP/HTTP exports (/v1/logs, /v1/traces) and answers each with an
// empty success, so what is measured is dbiolat's own work (choosing,
// making the records, encoding them, sending), not a collector's. Its
// CPU is the benchmark's, not the tool's.
type otlpSink struct {
	url     string
	exports atomic.Int64
	srv     *http.Server
}

func startOTLPSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{url: "http://" + ln.Addr().String()}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		s.exports.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty Export*ServiceResponse: all accepted
	})}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *otlpSink) Close() error { return s.srv.Close() }
