// Routing by the rendered HTTPRoutes, as the rendered gateway does it. With several pools
// (`llmd-fleet:models`, docs/multi-model.md) the request's headers and body first go to the
// body-based router (gateway-api-inference-extension v1.5.0 cmd/bbr, over ext_proc in its
// --streaming mode), whose header mutation is applied; without --bbr (one model) that step is
// left out. Then the rendered HTTPRoutes' rules are matched against the request with those
// headers, and the request goes to one of the winning rule's backendRefs, chosen per request in
// proportion to their weights (`serving.canary`: the stable and the canary InferencePool,
// docs/day-two.md), and to the picker pair of that InferencePool. A request no rule matches gets
// the gateway's no-route answer: 404, "route not found" (agentgateway
// crates/agentgateway/src/proxy/mod.rs, ProxyError::RouteNotFound). A rule whose route has an
// AgentgatewayPolicy with a direct response is answered with it, before any backend, as
// agentgateway does (v1.2.1 crates/agentgateway/src/proxy/httpproxy.rs).
//
// The table is re-read when its file changes (--routes-reload): the harness writes it again from
// the HTTPRoute it applied, as the gateway's controller translates a changed route; pools new to
// the table get their pickers connected then.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	extproc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const modelListPath = "/v1/models"

// The routing table devtools/dataplane/multimodel.py writes from the rendered HTTPRoutes.
type headerMatch struct {
	Name  string `json:"name"`
	Value string `json:"value"` // type Exact, the only type the rendering uses
}

type routeMatch struct {
	PathType string        `json:"pathType"` // Exact or PathPrefix
	Path     string        `json:"path"`
	Method   string        `json:"method"`
	Headers  []headerMatch `json:"headers"`
}

// directResponse is a rendered AgentgatewayPolicy's spec.traffic.directResponse on the route.
type directResponse struct {
	Status int    `json:"status"`
	Body   string `json:"body"`
}

// backendRef is one InferencePool backendRef of a rule with its weight (Gateway API
// BackendRef.weight: the harness writes the CRD's default 1 where the rendering sets none).
type backendRef struct {
	Pool   string `json:"pool"`
	Weight int    `json:"weight"`
}

type routeRule struct {
	Route    string          `json:"route"`
	Backends []backendRef    `json:"backends"`
	Matches  []routeMatch    `json:"matches"`
	Direct   *directResponse `json:"direct,omitempty"`
}

type routeTable struct {
	Rules   []routeRule       `json:"rules"`
	Pickers map[string]string `json:"pickers"`          // pool: comma-separated ext_proc addresses
	Health  map[string]string `json:"health,omitempty"` // pool: its pickers' gRPC health addresses
}

type routes struct {
	mu       sync.RWMutex
	table    routeTable
	bbr      *grpc.ClientConn
	pools    map[string]*picker
	probe    probeSettings
	deadline time.Duration
	draw     func(n int) int // a uniform integer in [0, n)
}

// probeSettings are the rendered picker Deployment's readiness probe (period, failure threshold).
type probeSettings struct {
	period   time.Duration
	failures int
}

func readTable(path string) (routeTable, error) {
	var t routeTable
	data, err := os.ReadFile(path)
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return t, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

func connectRoutes(path, bbr string, probe probeSettings, deadline time.Duration) (*routes, error) {
	table, err := readTable(path)
	if err != nil {
		return nil, err
	}
	g := &routes{pools: map[string]*picker{}, probe: probe, deadline: deadline, draw: rand.IntN}
	if bbr != "" {
		// The rendered router serves plaintext (--secure-serving=false), as the gateway calls it.
		if g.bbr, err = grpc.NewClient(bbr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			return nil, err
		}
	}
	if err := g.use(table); err != nil {
		return nil, err
	}
	return g, nil
}

// use makes `table` the routing table, connecting the pickers of pools it has not seen before.
func (g *routes) use(table routeTable) error {
	fresh := map[string]*picker{}
	for pool, addrs := range table.Pickers {
		g.mu.RLock()
		_, known := g.pools[pool]
		g.mu.RUnlock()
		if known {
			continue
		}
		p, err := connect(addrs, table.Health[pool], g.probe.period, g.probe.failures, g.deadline)
		if err != nil {
			return err
		}
		fresh[pool] = p
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for pool, p := range fresh {
		g.pools[pool] = p
	}
	g.table = table
	return nil
}

// watch re-reads the table every `period` once its file's modification time changes (the
// harness replaces the file in one rename, so a read never sees half of it).
func (g *routes) watch(path string, period time.Duration) {
	last := time.Time{}
	if info, err := os.Stat(path); err == nil {
		last = info.ModTime()
	}
	for {
		time.Sleep(period)
		info, err := os.Stat(path)
		if err != nil || info.ModTime().Equal(last) {
			continue
		}
		last = info.ModTime()
		table, err := readTable(path)
		if err == nil {
			err = g.use(table)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "gateway: routes not reloaded:", err)
			continue
		}
		fmt.Fprintln(os.Stderr, "gateway: routes reloaded from", path)
	}
}

// chooseBackend picks one backendRef as Gateway API specifies a rule's split: each gets the share
// weight / sum of the rule's weights, and one of weight 0 gets nothing (HTTPBackendRef.weight in
// the vendored schemas/crds/gateway.networking.k8s.io/gateway.networking.k8s.io_httproutes.yaml,
// bundle v1.5.1); agentgateway v1.2.1 draws the same per request
// (crates/agentgateway/src/proxy/httpproxy.rs select_backend, choose_weighted). -1 when no
// backend has weight (no backend to send to).
func chooseBackend(backends []backendRef, draw func(n int) int) int {
	total := 0
	for _, b := range backends {
		if b.Weight > 0 {
			total += b.Weight
		}
	}
	if total == 0 {
		return -1
	}
	n := draw(total)
	for i, b := range backends {
		if b.Weight <= 0 {
			continue
		}
		if n < b.Weight {
			return i
		}
		n -= b.Weight
	}
	return -1 // unreachable for a draw in [0, total)
}

// matches says whether m matches the request (header names compare case-insensitively).
func (m routeMatch) matches(method, path string, headers map[string]string) bool {
	if m.Method != "" && m.Method != method {
		return false
	}
	switch m.PathType {
	case "Exact":
		if path != m.Path {
			return false
		}
	default: // PathPrefix, by path elements
		prefix := strings.TrimSuffix(m.Path, "/")
		if path != prefix && !strings.HasPrefix(path, prefix+"/") {
			return false
		}
	}
	for _, h := range m.Headers {
		if v, ok := headers[strings.ToLower(h.Name)]; !ok || v != h.Value {
			return false
		}
	}
	return true
}

// precedence orders matches as Gateway API does across a Gateway's routes (HTTPRouteRule:
// an exact path, then the longest path, then a method, then the most header matches); the
// first rule in the table wins a tie (the table keeps the routes' order by name).
func (m routeMatch) precedence() [4]int {
	exact := 0
	if m.PathType == "Exact" {
		exact = 1
	}
	method := 0
	if m.Method != "" {
		method = 1
	}
	return [4]int{exact, len(m.Path), method, len(m.Headers)}
}

func better(a, b [4]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return false
}

// selectRule is the rule the gateway routes the request by, or nil when none matches.
func (g *routes) selectRule(method, path string, headers map[string]string) *routeRule {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var best *routeRule
	var bestRank [4]int
	for i := range g.table.Rules {
		rule := &g.table.Rules[i]
		matches := rule.Matches
		if len(matches) == 0 { // no matches: a prefix match on "/" (Gateway API default)
			matches = []routeMatch{{PathType: "PathPrefix", Path: "/"}}
		}
		for _, m := range matches {
			if m.matches(method, path, headers) && (best == nil || better(m.precedence(), bestRank)) {
				best, bestRank = rule, m.precedence()
			}
		}
	}
	return best
}

// bodyRouted runs the body-based router's request phase: headers, then the body in one frame
// (headers alone for a request without one); the headers it sets are applied to `headers`.
func (g *routes) bodyRouted(e *entry, headers map[string]string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := extproc.NewExternalProcessorClient(g.bbr).Process(ctx)
	if err != nil {
		return err
	}
	headersOnly := len(e.Body) == 0
	if err := s.Send(&extproc.ProcessingRequest{Request: &extproc.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extproc.HttpHeaders{Headers: headerMap(headers), EndOfStream: headersOnly}}}); err != nil {
		return err
	}
	if !headersOnly {
		if err := s.Send(&extproc.ProcessingRequest{Request: &extproc.ProcessingRequest_RequestBody{
			RequestBody: &extproc.HttpBody{Body: e.Body, EndOfStream: true}}}); err != nil {
			return err
		}
	}
	out := &picked{headers: headers}
	defer func() { _ = s.CloseSend() }()
	for {
		r, err := s.Recv()
		if err != nil {
			return err
		}
		switch v := r.GetResponse().(type) {
		case *extproc.ProcessingResponse_ImmediateResponse:
			return fmt.Errorf("body-based router answered %d", v.ImmediateResponse.GetStatus().GetCode())
		case *extproc.ProcessingResponse_RequestHeaders:
			applyMutation(v.RequestHeaders.GetResponse(), out)
			if headersOnly {
				return nil
			}
		case *extproc.ProcessingResponse_RequestBody:
			// The streamed body comes back in chunks; the last ends the stream.
			streamed := v.RequestBody.GetResponse().GetBodyMutation().GetStreamedResponse()
			if streamed == nil || streamed.GetEndOfStream() {
				return nil
			}
		}
	}
}

func (g *routes) route(e *entry, start time.Time, client *http.Client, deadline time.Duration) (result, *answer) {
	headers := map[string]string{}
	for k, v := range e.Headers {
		headers[strings.ToLower(k)] = v
	}
	began := time.Now()
	if g.bbr != nil { // one model: no body-based router in front of the route
		if err := g.bodyRouted(e, headers); err != nil {
			return result{ID: e.ID, Phase: e.Phase, Session: e.Session, Program: e.Program,
				StartMs: float64(began.Sub(start).Microseconds()) / 1000, Outcome: "unrouted",
				Error: fmt.Sprint("body-based router: ", err)}, nil
		}
	}
	rule := g.selectRule(e.method(), e.path(), headers)
	if rule == nil {
		return result{ID: e.ID, Phase: e.Phase, Session: e.Session, Program: e.Program,
			StartMs: float64(began.Sub(start).Microseconds()) / 1000, Outcome: "no-route",
			Status: http.StatusNotFound, Error: "route not found"}, nil
	}
	if d := rule.Direct; d != nil {
		r := result{ID: e.ID, Phase: e.Phase, Session: e.Session, Program: e.Program,
			StartMs: float64(began.Sub(start).Microseconds()) / 1000, Outcome: "direct",
			Status: d.Status, Route: rule.Route, TotalMs: float64(time.Since(began).Microseconds()) / 1000}
		if e.method() == http.MethodGet && e.path() == modelListPath {
			r.Listed = d.Body
		}
		return r, nil
	}
	chosen := chooseBackend(rule.Backends, g.draw)
	if chosen < 0 {
		// Every weight 0, which the spec leaves open and the rendering never has (stable
		// 100 - weight, canary weight): answered 500, as Gateway API answers a rule whose
		// backendRefs are all invalid (HTTPRouteRule.backendRefs).
		return result{ID: e.ID, Phase: e.Phase, Session: e.Session, Program: e.Program,
			StartMs: float64(began.Sub(start).Microseconds()) / 1000, Outcome: "no-backend",
			Status: http.StatusInternalServerError, Route: rule.Route,
			Error: "no backendRef with a weight above 0"}, nil
	}
	pool := rule.Backends[chosen].Pool
	g.mu.RLock()
	p, ok := g.pools[pool]
	g.mu.RUnlock()
	if !ok {
		return result{ID: e.ID, Phase: e.Phase, Outcome: "unrouted", Route: rule.Route, Pool: pool,
			Error: errors.New("no picker for the pool").Error()}, nil
	}
	routed := *e
	routed.Headers = headers
	r, a := p.route(&routed, start, client, deadline)
	r.Route, r.Pool = rule.Route, pool
	return r, a
}
