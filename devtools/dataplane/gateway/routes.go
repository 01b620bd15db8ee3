// Routing several pools behind one gateway (`llmd-fleet:models`, docs/multi-model.md), as the
// rendered gateway does it: before routing, the request's headers and body go to the body-based
// router (gateway-api-inference-extension v1.5.0 cmd/bbr, over ext_proc in its --streaming mode),
// whose header mutation is applied; then the rendered HTTPRoutes' rules are matched against the
// request with those headers, and the request goes to the picker pair of the InferencePool the
// winning rule names. A request no rule matches gets the gateway's no-route answer: 404, "route
// not found" (agentgateway crates/agentgateway/src/proxy/mod.rs, ProxyError::RouteNotFound). A
// rule whose route has an AgentgatewayPolicy with a direct response is answered with it, before
// any backend, as agentgateway does (v1.2.1 crates/agentgateway/src/proxy/httpproxy.rs).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
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

type routeRule struct {
	Route   string          `json:"route"`
	Pool    string          `json:"pool"`
	Matches []routeMatch    `json:"matches"`
	Direct  *directResponse `json:"direct,omitempty"`
}

type routeTable struct {
	Rules   []routeRule       `json:"rules"`
	Pickers map[string]string `json:"pickers"` // pool: comma-separated ext_proc addresses
}

type routes struct {
	table routeTable
	bbr   *grpc.ClientConn
	pools map[string]*picker
}

func connectRoutes(path, bbr string, deadline time.Duration) (*routes, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	g := &routes{pools: map[string]*picker{}}
	if err := json.Unmarshal(data, &g.table); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// The rendered router serves plaintext (--secure-serving=false), as the gateway calls it.
	if g.bbr, err = grpc.NewClient(bbr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return nil, err
	}
	for pool, addrs := range g.table.Pickers {
		if g.pools[pool], err = connect(addrs, "", 0, 0, deadline); err != nil {
			return nil, err
		}
	}
	return g, nil
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
	if err := g.bodyRouted(e, headers); err != nil {
		return result{ID: e.ID, Phase: e.Phase, Session: e.Session, Program: e.Program,
			StartMs: float64(began.Sub(start).Microseconds()) / 1000, Outcome: "unrouted",
			Error: fmt.Sprint("body-based router: ", err)}, nil
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
	p, ok := g.pools[rule.Pool]
	if !ok {
		return result{ID: e.ID, Phase: e.Phase, Outcome: "unrouted", Route: rule.Route, Pool: rule.Pool,
			Error: errors.New("no picker for the pool").Error()}, nil
	}
	routed := *e
	routed.Headers = headers
	r, a := p.route(&routed, start, client, deadline)
	r.Route, r.Pool = rule.Route, rule.Pool
	return r, a
}
