// The data-plane twin's gateway stand-in (docs/twin.md): it plays the part agentgateway/Envoy play
// in a cluster, and only that part. For every request of a replay it opens an ext_proc stream to
// the endpoint picker, sends the request headers and body, reads back the header mutation (the
// destination endpoint, the prefill header of P/D), forwards the request there over HTTP, and
// hands the response back to the picker so its response-phase plugins (session token, request
// accounting) see it. It is compiled inside the pinned router's module at build time (the envoy
// ext_proc protos come from that module's requirements); no router code is copied.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extproc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// One replayed request, as devtools/dataplane/replay.py writes it (one JSON object a line).
type entry struct {
	ID      string            `json:"id"`
	AtMs    int64             `json:"at_ms"`
	Phase   string            `json:"phase"`
	Session string            `json:"session"`
	Turn    int               `json:"turn"`
	Band    string            `json:"band"`
	Program string            `json:"program"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
	// The request's own method, path and host: serve mode's, or a replay entry's own (a replay
	// entry without them is a chat completion).
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	Host   string `json:"host,omitempty"`
}

// What happened to it, read by devtools/dataplane/report.py.
type result struct {
	ID          string  `json:"id"`
	Phase       string  `json:"phase"`
	Session     string  `json:"session"`
	Turn        int     `json:"turn"`
	Band        string  `json:"band"`
	Program     string  `json:"program"`
	StartMs     float64 `json:"start_ms"`
	Picker      string  `json:"picker"`
	Destination string  `json:"destination"`
	Prefill     string  `json:"prefill"`
	Status      int     `json:"status"`
	Method      string  `json:"method,omitempty"`
	Path        string  `json:"path,omitempty"`
	Host        string  `json:"host,omitempty"`
	Outcome     string  `json:"outcome"`
	Reason      string  `json:"reason,omitempty"`
	PickMs      float64 `json:"pick_ms"`
	TTFTMs      float64 `json:"ttft_ms"`
	TotalMs     float64 `json:"total_ms"`
	Error       string  `json:"error,omitempty"`
	// The engine's own account of the prompt, from the usage the response carries (the replay
	// asks for it: stream_options.include_usage): prompt tokens and those already in its prefix
	// cache (usage.prompt_tokens_details.cached_tokens). Absent when the response has no usage.
	PromptTokens *int `json:"prompt_tokens,omitempty"`
	CachedTokens *int `json:"cached_tokens,omitempty"`
	// With --routes: the HTTPRoute and InferencePool the request went to (empty: no route
	// matched), and the body of a GET /v1/models answer.
	Route  string `json:"route,omitempty"`
	Pool   string `json:"pool,omitempty"`
	Listed string `json:"listed,omitempty"`
}

// usageOf reads the last usage object of an OpenAI-style event stream (or JSON body).
func usageOf(body []byte) (prompt, cached *int) {
	for _, line := range bytes.Split(body, []byte("\n")) {
		line = bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(line), []byte("data:")))
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var chunk struct {
			Usage *struct {
				PromptTokens        *int `json:"prompt_tokens"`
				PromptTokensDetails *struct {
					CachedTokens *int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if json.Unmarshal(line, &chunk) != nil || chunk.Usage == nil || chunk.Usage.PromptTokens == nil {
			continue
		}
		prompt, cached = chunk.Usage.PromptTokens, nil
		if d := chunk.Usage.PromptTokensDetails; d != nil {
			cached = d.CachedTokens
		}
	}
	return prompt, cached
}

const destinationHeader = "x-gateway-destination-endpoint" // pkg/epp/metadata/consts.go
const prefillHeader = "x-prefiller-host-port"              // pkg/common/.../PrefillEndpointHeader
const droppedHeader = "x-llm-d-request-dropped-reason"     // pkg/common/error/error.go

type picked struct {
	destination string
	prefill     string
	headers     map[string]string
	body        []byte
	immediate   int    // HTTP status of an ImmediateResponse (flow control rejection), else 0
	reason      string // its dropped-reason header
}

type picker struct {
	addrs   []string
	conns   []*grpc.ClientConn
	current atomic.Int32
	// Readiness as a Service sees it: the kubelet's gRPC probe of the picker's "readiness"
	// health service (ready only on the leader and not while draining, cmd/epp/runner/health.go),
	// every probe period, not ready after failureThreshold failures, ready after one success.
	ready []atomic.Bool
}

func (p *picker) probe(health string, i int, period time.Duration, failures int) {
	conn, err := grpc.NewClient(health, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return
	}
	failed := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), period)
		r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "readiness"})
		cancel()
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			failed = 0
			p.ready[i].Store(true)
		} else if failed++; failed >= failures {
			p.ready[i].Store(false)
		}
		time.Sleep(period)
	}
}

// next is the picker a request goes to: with probes, a ready one (the current if it is),
// else -1; without, the current one.
func (p *picker) next() int {
	i := int(p.current.Load())
	if p.ready == nil || p.ready[i].Load() {
		return i
	}
	for j := range p.addrs {
		if p.ready[j].Load() {
			p.current.Store(int32(j))
			return j
		}
	}
	return -1
}

func (p *picker) stream(ctx context.Context, i int) (extproc.ExternalProcessor_ProcessClient, error) {
	return extproc.NewExternalProcessorClient(p.conns[i]).Process(ctx)
}

func headerMap(h map[string]string) *corev3.HeaderMap {
	list := make([]*corev3.HeaderValue, 0, len(h))
	for k, v := range h {
		list = append(list, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
	}
	return &corev3.HeaderMap{Headers: list}
}

func applyMutation(m *extproc.CommonResponse, out *picked) {
	if m == nil {
		return
	}
	if hm := m.GetHeaderMutation(); hm != nil {
		for _, h := range hm.GetSetHeaders() {
			v := string(h.GetHeader().GetRawValue())
			if v == "" {
				v = h.GetHeader().GetValue()
			}
			out.headers[strings.ToLower(h.GetHeader().GetKey())] = v
		}
		for _, k := range hm.GetRemoveHeaders() {
			delete(out.headers, strings.ToLower(k))
		}
	}
	if bm := m.GetBodyMutation(); bm != nil {
		if b := bm.GetBody(); b != nil {
			out.body = b
		} else if s := bm.GetStreamedResponse(); s != nil {
			out.body = append(out.body[:0:0], s.GetBody()...)
		}
	}
}

// pick runs the request phase on picker i: headers, then the whole body in one frame.
func (p *picker) pick(ctx context.Context, i int, e *entry) (extproc.ExternalProcessor_ProcessClient, *picked, error) {
	s, err := p.stream(ctx, i)
	if err != nil {
		return nil, nil, err
	}
	h := map[string]string{
		":method": e.method(), ":path": e.path(), ":authority": "llm-d-inference-gateway",
		":scheme": "http", "content-type": "application/json", "x-request-id": e.ID,
	}
	if e.Host != "" {
		h[":authority"] = e.Host
	}
	for k, v := range e.Headers {
		h[k] = v
	}
	// A request without a body (GET /health) ends with its headers, as Envoy sends it; the picker
	// then answers the headers alone (pkg/epp/handlers/request.go: a random endpoint).
	headersOnly := len(e.Body) == 0
	if err := s.Send(&extproc.ProcessingRequest{Request: &extproc.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extproc.HttpHeaders{Headers: headerMap(h), EndOfStream: headersOnly}}}); err != nil {
		return nil, nil, err
	}
	if !headersOnly {
		if err := s.Send(&extproc.ProcessingRequest{Request: &extproc.ProcessingRequest_RequestBody{
			RequestBody: &extproc.HttpBody{Body: e.Body, EndOfStream: true}}}); err != nil {
			return nil, nil, err
		}
	}
	out := &picked{headers: h, body: append([]byte(nil), e.Body...)}
	bodyChunks := 0
	for {
		r, err := s.Recv()
		if err != nil {
			return nil, nil, err
		}
		switch v := r.GetResponse().(type) {
		case *extproc.ProcessingResponse_ImmediateResponse:
			out.immediate = int(v.ImmediateResponse.GetStatus().GetCode())
			for _, h := range v.ImmediateResponse.GetHeaders().GetSetHeaders() {
				if strings.EqualFold(h.GetHeader().GetKey(), droppedHeader) {
					out.reason = string(h.GetHeader().GetRawValue())
					if out.reason == "" {
						out.reason = h.GetHeader().GetValue()
					}
				}
			}
			return s, out, nil
		case *extproc.ProcessingResponse_RequestHeaders:
			applyMutation(v.RequestHeaders.GetResponse(), out)
			if !headersOnly {
				continue
			}
			out.destination = out.headers[destinationHeader]
			if i := strings.Index(out.destination, ","); i >= 0 {
				out.destination = out.destination[:i]
			}
			return s, out, nil
		case *extproc.ProcessingResponse_RequestBody:
			// The picker streams the body it forwards back in chunks of at most 62,000 bytes, the
			// last with end of stream (llm-d-router pkg/common/envoy/chunking.go
			// BuildChunkedBodyResponses): the first replaces the request's body, the others are
			// appended, and the pick is complete with the last.
			streamed := v.RequestBody.GetResponse().GetBodyMutation().GetStreamedResponse()
			if streamed != nil && bodyChunks > 0 {
				out.body = append(out.body, streamed.GetBody()...)
			} else {
				applyMutation(v.RequestBody.GetResponse(), out)
			}
			bodyChunks++
			if streamed != nil && !streamed.GetEndOfStream() {
				continue
			}
			out.destination = out.headers[destinationHeader]
			out.prefill = out.headers[prefillHeader]
			if md := r.GetDynamicMetadata(); out.destination == "" && md != nil {
				if lb, ok := md.GetFields()["envoy.lb"]; ok {
					out.destination = lb.GetStructValue().GetFields()[destinationHeader].GetStringValue()
				}
			}
			if i := strings.Index(out.destination, ","); i >= 0 { // fallbacks follow the first
				out.destination = out.destination[:i]
			}
			return s, out, nil
		}
	}
}

func (e *entry) method() string {
	if e.Method != "" {
		return e.Method
	}
	return http.MethodPost
}

func (e *entry) path() string {
	if e.Path != "" {
		return e.Path
	}
	return "/v1/chat/completions"
}

// respond hands the upstream response to the picker (response phase), best effort.
func respond(s extproc.ExternalProcessor_ProcessClient, status int, contentType string, body []byte) {
	if contentType == "" {
		contentType = "text/event-stream"
	}
	_ = s.Send(&extproc.ProcessingRequest{Request: &extproc.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extproc.HttpHeaders{Headers: headerMap(map[string]string{
			":status": fmt.Sprint(status), "content-type": contentType})}}})
	_ = s.Send(&extproc.ProcessingRequest{Request: &extproc.ProcessingRequest_ResponseBody{
		ResponseBody: &extproc.HttpBody{Body: body, EndOfStream: true}}})
	_ = s.CloseSend()
	for {
		if _, err := s.Recv(); err != nil {
			return
		}
	}
}

// route sends one request through the picker to the endpoint it names: what happened, and the
// endpoint's response (status, content type, body; nil when no endpoint answered).
// router sends one request on its way: one picker pair (a single pool), or the body-based router
// and the rendered HTTPRoutes in front of one picker pair per pool (routes.go).
type router interface {
	route(e *entry, start time.Time, client *http.Client, deadline time.Duration) (result, *answer)
}

func (p *picker) route(e *entry, start time.Time, client *http.Client, deadline time.Duration) (result, *answer) {
	r := result{ID: e.ID, Phase: e.Phase, Session: e.Session, Turn: e.Turn, Band: e.Band, Program: e.Program,
		StartMs: float64(time.Since(start).Microseconds()) / 1000, Method: e.Method, Path: e.Path, Host: e.Host}
	began := time.Now()
	var s extproc.ExternalProcessor_ProcessClient
	var got *picked
	var lastErr error
	// A Service in front of the pickers sends to the ready one (the leader); the stand-in keeps
	// the last picker that answered and moves to the next on an error, until the deadline.
	for attempt := 0; time.Since(began) < deadline; attempt++ {
		i := p.next()
		if i < 0 {
			lastErr = errors.New("no picker ready")
			time.Sleep(100 * time.Millisecond)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var err error
		s, got, err = p.pick(ctx, i, e)
		if err == nil && (got.immediate != 0 || got.destination != "") {
			r.Picker = p.addrs[i]
			defer cancel()
			break
		}
		cancel()
		if err == nil {
			err = errors.New("picker returned no destination")
		}
		lastErr = err
		p.current.CompareAndSwap(int32(i), int32((i+1)%len(p.addrs)))
		got = nil
		time.Sleep(100 * time.Millisecond)
	}
	r.PickMs = float64(time.Since(began).Microseconds()) / 1000
	if got == nil {
		r.Outcome, r.Error = "unrouted", fmt.Sprint(lastErr)
		return r, nil
	}
	if got.immediate != 0 {
		r.Outcome, r.Status, r.Reason = "rejected", got.immediate, got.reason
		return r, nil
	}
	r.Destination, r.Prefill = got.destination, got.prefill
	var body io.Reader = bytes.NewReader(got.body)
	if len(got.body) == 0 {
		body = nil
	}
	req, _ := http.NewRequest(e.method(), "http://"+got.destination+e.path(), body)
	for k, v := range got.headers {
		if !strings.HasPrefix(k, ":") && k != "content-length" {
			req.Header.Set(k, v)
		}
	}
	sent := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		r.Outcome, r.Error = "failed", err.Error()
		respond(s, 502, "", nil)
		return r, nil
	}
	reader := bufio.NewReader(resp.Body)
	var all bytes.Buffer
	first := true
	for {
		line, err := reader.ReadBytes('\n')
		if len(line) > 0 && first {
			r.TTFTMs = float64(time.Since(sent).Microseconds()) / 1000
			first = false
		}
		all.Write(line)
		if err != nil {
			break
		}
	}
	_ = resp.Body.Close()
	r.Status = resp.StatusCode
	r.TotalMs = float64(time.Since(sent).Microseconds()) / 1000
	r.Outcome = "served"
	r.PromptTokens, r.CachedTokens = usageOf(all.Bytes())
	if e.method() == http.MethodGet && e.path() == modelListPath {
		r.Listed = all.String()
	}
	if resp.StatusCode >= 300 {
		r.Outcome = "failed"
		r.Error = strings.TrimSpace(all.String())
		if len(r.Error) > 300 {
			r.Error = r.Error[:300]
		}
	}
	contentType := resp.Header.Get("Content-Type")
	respond(s, resp.StatusCode, contentType, all.Bytes())
	return r, &answer{status: resp.StatusCode, contentType: contentType, body: all.Bytes()}
}

type answer struct {
	status      int
	contentType string
	body        []byte
}

// serve answers OpenAI-style requests on addr as the gateway would (the user-facing path:
// `llmd-fleet status --request`, and the agentic API's upstream): each request's method, path,
// host, headers and body go through the picker to the endpoint it names, and that endpoint's
// response comes back. A request the picker rejects gets
// its status and dropped reason; one no picker routes gets 503.
func (p *picker) serve(addr string, client *http.Client, deadline time.Duration) error {
	var n atomic.Int64
	start := time.Now()
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		e := &entry{ID: fmt.Sprintf("serve-%d", n.Add(1)), Phase: "serve", Session: "serve",
			Headers: map[string]string{}, Body: body, Method: req.Method, Path: req.URL.RequestURI(), Host: req.Host}
		for k, v := range req.Header {
			if len(v) > 0 {
				e.Headers[strings.ToLower(k)] = v[0]
			}
		}
		r, a := p.route(e, start, client, deadline)
		line, _ := json.Marshal(r)
		fmt.Println(string(line))
		switch {
		case a != nil:
			if a.contentType != "" {
				w.Header().Set("Content-Type", a.contentType)
			}
			w.WriteHeader(a.status)
			_, _ = w.Write(a.body)
		case r.Outcome == "rejected":
			w.Header().Set(droppedHeader, r.Reason)
			http.Error(w, "rejected: "+r.Reason, r.Status)
		default:
			http.Error(w, r.Outcome+": "+r.Error, http.StatusServiceUnavailable)
		}
	})
	return http.ListenAndServe(addr, handler) //nolint:gosec // a stand-in inside the run's namespaces
}

func scrape(client *http.Client, urls []string, dir, tag string) {
	for _, u := range urls {
		resp, err := client.Get(u)
		text := []byte(fmt.Sprint("# error: ", err))
		if err == nil {
			text, _ = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
		}
		name := strings.NewReplacer("http://", "", "/", "_", ":", "_").Replace(u)
		_ = os.WriteFile(fmt.Sprintf("%s/%s-%s.prom", dir, tag, name), text, 0o644)
	}
}

// series scrapes the URLs every period and appends one line of raw expositions per scrape
// (t in ms since start), until stop is closed.
func series(client *http.Client, urls []string, path string, start time.Time, period time.Duration, stop chan struct{}) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for {
		texts := make([]string, 0, len(urls))
		for _, u := range urls {
			resp, err := client.Get(u)
			if err != nil {
				texts = append(texts, "")
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			texts = append(texts, string(b))
		}
		_ = enc.Encode(map[string]any{"t_ms": time.Since(start).Milliseconds(), "scrapes": texts})
		select {
		case <-stop:
			return
		case <-time.After(period):
		}
	}
}

// pickerBackoff bounds the wait between dials of a picker's ext_proc address at one second. A
// standby picker serves ext_proc only once it leads (cmd/epp/runner: the server is a leader
// election runnable), so its first dials after a hand-over may be refused; with gRPC's default
// backoff (1 s growing by 1.6 to 120 s) the next dial could come half a minute after it listens,
// while a gateway in front of a Service dials a ready endpoint on the next request.
var pickerBackoff = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 5 * time.Second,
})

// connect opens the pickers' ext_proc connections and, with health addresses, probes their
// readiness; it returns once a Service would have an endpoint (or the deadline passes).
func connect(pickers, health string, period time.Duration, failures int, deadline time.Duration) (*picker, error) {
	p := &picker{addrs: strings.Split(pickers, ",")}
	for _, a := range p.addrs {
		// The picker serves ext_proc over TLS with a self-signed certificate (--secure-serving,
		// default true); gateways in front of it skip verification, and so does the stand-in.
		creds := credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}) //nolint:gosec
		c, err := grpc.NewClient(a, grpc.WithTransportCredentials(creds), pickerBackoff)
		if err != nil {
			return nil, err
		}
		p.conns = append(p.conns, c)
	}
	if health != "" {
		addrs := strings.Split(health, ",")
		p.ready = make([]atomic.Bool, len(addrs))
		for i, a := range addrs {
			go p.probe(a, i, period, failures)
		}
		for waited := time.Duration(0); p.next() < 0 && waited < deadline; waited += 100 * time.Millisecond {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return p, nil
}

func main() {
	pickers := flag.String("pickers", "", "comma-separated ext_proc addresses of the endpoint pickers")
	replay := flag.String("replay", "", "replay file (JSON lines)")
	out := flag.String("out", "", "directory for results.jsonl and metric scrapes")
	scrapes := flag.String("scrape", "", "comma-separated metrics URLs scraped before and after")
	deadline := flag.Duration("pick-deadline", 15*time.Second, "how long one request may wait for a picker")
	health := flag.String("health", "", "comma-separated gRPC health addresses of the pickers (probed for readiness)")
	probePeriod := flag.Duration("probe-period", 2*time.Second, "readiness probe period")
	probeFailures := flag.Int("probe-failures", 3, "readiness probe failure threshold")
	seriesPeriod := flag.Duration("series-period", 0, "scrape the metrics URLs this often into series.jsonl (0: off)")
	listen := flag.String("listen", "", "serve requests on this address until stopped, instead of a replay")
	routesFile := flag.String("routes", "", "route by the rendered HTTPRoutes (JSON, devtools/dataplane/multimodel.py) instead of --pickers")
	bbrAddr := flag.String("bbr", "", "ext_proc address of the body-based router (with --routes; several models)")
	routesReload := flag.Duration("routes-reload", 0, "re-read the --routes file this often once it changed (0: never)")
	flag.Parse()
	if (*listen == "") == (*replay == "") {
		fmt.Fprintln(os.Stderr, "gateway: give exactly one of --replay and --listen")
		os.Exit(2)
	}
	if (*bbrAddr != "" || *routesReload != 0) && *routesFile == "" || (*routesFile != "" && *listen != "") {
		fmt.Fprintln(os.Stderr, "gateway: --bbr and --routes-reload need --routes, which needs --replay")
		os.Exit(2)
	}
	var p router
	var err error
	if *routesFile != "" {
		var g *routes
		g, err = connectRoutes(*routesFile, *bbrAddr, probeSettings{*probePeriod, *probeFailures}, *deadline)
		if err == nil && *routesReload > 0 {
			go g.watch(*routesFile, *routesReload)
		}
		p = g
	} else {
		p, err = connect(*pickers, *health, *probePeriod, *probeFailures, *deadline)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	client := &http.Client{Timeout: 120 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}}
	if *listen != "" {
		fmt.Fprintln(os.Stderr, p.(*picker).serve(*listen, client, *deadline))
		os.Exit(1)
	}
	data, err := os.ReadFile(*replay)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var entries []entry
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e entry
		if err := json.Unmarshal(line, &e); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		entries = append(entries, e)
	}
	urls := []string{}
	if *scrapes != "" {
		urls = strings.Split(*scrapes, ",")
	}
	scrape(client, urls, *out, "before")
	file, err := os.Create(*out + "/results.jsonl")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	enc := json.NewEncoder(file)
	start := time.Now()
	// The replay's clock, for whoever stops a picker mid-replay (unix ms).
	_ = os.WriteFile(*out+"/start_unix_ms", []byte(fmt.Sprint(start.UnixMilli())), 0o644)
	stop := make(chan struct{})
	done := make(chan struct{})
	if *seriesPeriod > 0 {
		go func() { series(client, urls, *out+"/series.jsonl", start, *seriesPeriod, stop); close(done) }()
	} else {
		close(done)
	}
	// Turns of one session go in order (a turn follows the previous answer); sessions and bursts
	// run concurrently at their scheduled times.
	bySession := map[string][]*entry{}
	var order []string
	for i := range entries {
		e := &entries[i]
		if _, ok := bySession[e.Session]; !ok {
			order = append(order, e.Session)
		}
		bySession[e.Session] = append(bySession[e.Session], e)
	}
	for _, name := range order {
		wg.Add(1)
		go func(list []*entry) {
			defer wg.Done()
			for _, e := range list {
				if wait := time.Duration(e.AtMs)*time.Millisecond - time.Since(start); wait > 0 {
					time.Sleep(wait)
				}
				r, _ := p.route(e, start, client, *deadline)
				mu.Lock()
				_ = enc.Encode(r)
				mu.Unlock()
			}
		}(bySession[name])
	}
	wg.Wait()
	close(stop)
	<-done
	_ = file.Close()
	scrape(client, urls, *out, "after")
}
