// Command routercheck runs the pinned llm-d router's own code on a rendered EndpointPickerConfig:
// its config loader (strict decode, API version, feature gates), the factories of the llm-d 1.0
// plugins the fleet renders (strict parameter decode), and the session-key path of the
// session-affinity scorers on sample multi-turn conversations.
//
// Input (stdin, JSON): {"config": "<EndpointPickerConfig YAML>", "conversations": [{"name": "...",
// "turns": [{"headers": {...}}]}], "rollout": [{"name": "...", "pods": [{"name", "labels",
// "ready"}]}], "requests": N}. Output (stdout, JSON): the loader's verdict, each plugin's verdict,
// per conversation and turn the endpoint each session scorer prefers, and per rollout step what
// the rollout screener let through for N requests.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/llm-d/llm-d-router/pkg/epp/config/loader"
	"github.com/llm-d/llm-d-router/pkg/epp/flowcontrol"
	fwkdl "github.com/llm-d/llm-d-router/pkg/epp/framework/interface/datalayer"
	fwkplugin "github.com/llm-d/llm-d-router/pkg/epp/framework/interface/plugin"
	"github.com/llm-d/llm-d-router/pkg/epp/framework/interface/requestcontrol"
	"github.com/llm-d/llm-d-router/pkg/epp/framework/interface/scheduling"
	programaware "github.com/llm-d/llm-d-router/pkg/epp/framework/plugins/flowcontrol/fairness/program-aware"
	"github.com/llm-d/llm-d-router/pkg/epp/framework/plugins/requestcontrol/admitter/probabilisticadmitter"
	"github.com/llm-d/llm-d-router/pkg/epp/framework/plugins/requestcontrol/dataproducer/p2psource"
	"github.com/llm-d/llm-d-router/pkg/epp/framework/plugins/requestcontrol/dataproducer/sessionid"
	"github.com/llm-d/llm-d-router/pkg/epp/framework/plugins/requestcontrol/requestheader/agentidentity"
	"github.com/llm-d/llm-d-router/pkg/epp/framework/plugins/requestcontrol/screener/disaggregatedsetrollout"
	"github.com/llm-d/llm-d-router/pkg/epp/framework/plugins/scheduling/profilehandler/disagg"
	"github.com/llm-d/llm-d-router/pkg/epp/framework/plugins/scheduling/scorer/loraaffinity"
	"github.com/llm-d/llm-d-router/pkg/epp/framework/plugins/scheduling/scorer/sessionaffinity"
)

type input struct {
	Config        string         `json:"config"`
	Conversations []conversation `json:"conversations"`
	Rollout       []rolloutStep  `json:"rollout"`
	Requests      int            `json:"requests"`
}

// rolloutStep is one moment of a DisaggregatedSet rollout: the pool's pods and their readiness.
type rolloutStep struct {
	Name string       `json:"name"`
	Pods []rolloutPod `json:"pods"`
}

type rolloutPod struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	Ready  bool              `json:"ready"`
}

// stepResult counts what the screener returned for the step's requests: how many were failed
// closed (no endpoint), how many candidate sets mixed revisions, and how many went to each
// revision (keyed by the revision label's value).
type stepResult struct {
	Name       string         `json:"name"`
	FailClosed int            `json:"failClosed"`
	Mixed      int            `json:"mixed"`
	Revisions  map[string]int `json:"revisions"`
}

type conversation struct {
	Name  string `json:"name"`
	Turns []turn `json:"turns"`
}

type turn struct {
	Headers map[string]string `json:"headers"`
}

type pluginResult struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Error string `json:"error,omitempty"`
}

type turnResult struct {
	// Preferred maps a session scorer to the endpoint it scored 1 (empty: no preference).
	Preferred map[string]string `json:"preferred"`
	// Routed is the endpoint the turn was sent to and bound with.
	Routed string `json:"routed"`
	// ResponseHeaders are the headers the scorers wrote on the response.
	ResponseHeaders map[string]string `json:"responseHeaders"`
}

type output struct {
	APIVersion    string                  `json:"apiVersion"`
	LoaderError   string                  `json:"loaderError,omitempty"`
	FeatureGates  map[string]bool         `json:"featureGates,omitempty"`
	Plugins       []pluginResult          `json:"plugins"`
	Conversations map[string][]turnResult `json:"conversations"`
	Rollout       []stepResult            `json:"rollout,omitempty"`
}

// The llm-d 1.0 plugins this checker builds with their own factories (the types the router
// registers for them); the rest of the config is checked by the loader's strict decode.
var factories = map[string]fwkplugin.FactoryFunc{
	agentidentity.PluginType:               agentidentity.PluginFactory,
	sessionid.SessionIDProducerType:        sessionid.Factory,
	sessionaffinity.SessionAffinityType:    sessionaffinity.Factory,
	probabilisticadmitter.Type:             probabilisticadmitter.Factory,
	programaware.ProgramAwarePluginType:    programaware.ProgramAwarePluginFactory,
	disaggregatedsetrollout.PluginType:     disaggregatedsetrollout.Factory,
	p2psource.PluginType:                   p2psource.PluginFactory,
	disagg.AlwaysDisaggPDDeciderPluginType: disagg.AlwaysDisaggPDDeciderPluginFactory,
	disagg.PrefixBasedPDDeciderPluginType:  disagg.PrefixBasedPDDeciderPluginFactory,
	loraaffinity.LoraAffinityScorerType:    loraaffinity.LoraAffinityScorerFactory,
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "routercheck: bad input:", err)
		os.Exit(2)
	}
	out := output{Conversations: map[string][]turnResult{}}
	// The gate the EPP registers before it loads its config (cmd/epp/runner/runner.go).
	loader.RegisterFeatureGate(flowcontrol.FeatureGate, false)
	raw, gates, err := loader.LoadRawConfig([]byte(in.Config), logr.Discard())
	if err != nil {
		out.LoaderError = err.Error()
		emit(out)
		return
	}
	out.APIVersion = raw.APIVersion
	out.FeatureGates = gates

	ctx := context.Background()
	handle := fwkplugin.NewEppHandle(ctx, func() []k8stypes.NamespacedName { return nil })
	plugins := map[string]fwkplugin.Plugin{}
	var order []string
	for _, spec := range raw.Plugins {
		factory, ok := factories[spec.Type]
		if !ok {
			continue
		}
		name := spec.Name
		if name == "" {
			name = spec.Type
		}
		result := pluginResult{Name: name, Type: spec.Type}
		plugin, err := factory(name, fwkplugin.StrictDecoder(spec.Parameters), handle)
		if err != nil {
			result.Error = err.Error()
		} else {
			plugins[name] = plugin
			order = append(order, name)
		}
		out.Plugins = append(out.Plugins, result)
	}

	for _, name := range order {
		if screener, ok := plugins[name].(*disaggregatedsetrollout.Screener); ok {
			out.Rollout = rollout(ctx, screener, in.Rollout, in.Requests)
		}
	}

	endpoints := []scheduling.Endpoint{endpoint("decode-0"), endpoint("decode-1"), endpoint("decode-2")}
	for _, conv := range in.Conversations {
		var turns []turnResult
		echoed := map[string]string{}
		for i, t := range conv.Turns {
			request := &scheduling.InferenceRequest{
				RequestID: fmt.Sprintf("%s-%d", conv.Name, i),
				Headers:   map[string]string{},
			}
			for k, v := range t.Headers {
				request.Headers[k] = v
			}
			// A client echoes what the last response returned (the endpoint token).
			for k, v := range echoed {
				request.Headers[k] = v
			}
			result := turnResult{Preferred: map[string]string{}, ResponseHeaders: map[string]string{}}
			for _, name := range order {
				switch p := plugins[name].(type) {
				case requestcontrol.RequestHeaderProcessor:
					_ = p.RequestHeader(ctx, request)
				}
			}
			for _, name := range order {
				if p, ok := plugins[name].(requestcontrol.DataProducer); ok {
					_ = p.Produce(ctx, request, endpoints)
				}
			}
			for _, name := range order {
				if scorer, ok := plugins[name].(scheduling.Scorer); ok {
					result.Preferred[name] = preferred(scorer.Score(ctx, request, endpoints))
				}
			}
			// The picker: the endpoint any session scorer prefers, else (an unbound session)
			// the next endpoint in turn, so two new conversations never share one by accident.
			routed := ""
			for _, name := range sortedKeys(result.Preferred) {
				if e := result.Preferred[name]; e != "" && routed == "" {
					routed = e
				}
			}
			if routed == "" {
				routed = endpoints[(len(out.Conversations)+i)%len(endpoints)].GetMetadata().ID.Name
			}
			result.Routed = routed
			target := byName(endpoints, routed)
			schedulingResult := &scheduling.SchedulingResult{
				PrimaryProfileName: "decode",
				ProfileResults: map[string]*scheduling.ProfileRunResult{
					"decode": {TargetEndpoints: []scheduling.Endpoint{target}},
				},
			}
			for _, name := range order {
				if p, ok := plugins[name].(requestcontrol.PreRequest); ok {
					_ = p.PreRequest(ctx, request, schedulingResult)
				}
			}
			response := &requestcontrol.Response{RequestID: request.RequestID, Headers: map[string]string{}}
			for _, name := range order {
				if p, ok := plugins[name].(requestcontrol.ResponseHeaderProcessor); ok {
					p.ResponseHeader(ctx, request, response, target.GetMetadata())
				}
			}
			for k, v := range response.Headers {
				result.ResponseHeaders[k] = v
				echoed[k] = v
			}
			turns = append(turns, result)
		}
		out.Conversations[conv.Name] = turns
	}
	emit(out)
}

// registrar captures the pod-notification extractor the screener registers, which the EPP's data
// layer would feed from its Kubernetes watch.
type registrar struct{ extractor fwkdl.NotificationExtractor }

func (r *registrar) Register(registration fwkdl.PendingRegistration) error {
	if extractor, ok := registration.Extractor.(fwkdl.NotificationExtractor); ok {
		r.extractor = extractor
	}
	return nil
}

// rollout feeds each step's pods to the screener as the watch would (a pod that is gone or not
// Ready as an update the screener drops), then screens `requests` requests over the step's Ready
// pods and counts what came through.
func rollout(ctx context.Context, screener *disaggregatedsetrollout.Screener, steps []rolloutStep, requests int) []stepResult {
	// With revision gating off the screener registers no extractor: it then screens without pod
	// notifications, as the EPP would run it.
	capture := &registrar{}
	if err := screener.RegisterDependencies(capture); err != nil {
		return []stepResult{{Name: fmt.Sprintf("register: %v", err)}}
	}
	extract := func(event fwkdl.NotificationEvent) {
		if capture.extractor != nil {
			_ = capture.extractor.Extract(ctx, event)
		}
	}
	seen := map[string]bool{}
	var results []stepResult
	for _, step := range steps {
		present := map[string]bool{}
		var endpoints []scheduling.Endpoint
		for _, pod := range step.Pods {
			present[pod.Name] = true
			seen[pod.Name] = true
			extract(fwkdl.NotificationEvent{Type: fwkdl.EventAddOrUpdate, Object: podObject(pod)})
			if pod.Ready {
				endpoints = append(endpoints, labelledEndpoint(pod))
			}
		}
		for name := range seen {
			if !present[name] {
				gone := podObject(rolloutPod{Name: name})
				extract(fwkdl.NotificationEvent{Type: fwkdl.EventDelete, Object: gone})
				delete(seen, name)
			}
		}
		result := stepResult{Name: step.Name, Revisions: map[string]int{}}
		for i := 0; i < requests; i++ {
			request := &scheduling.InferenceRequest{RequestID: fmt.Sprintf("%s-%d", step.Name, i), Headers: map[string]string{}}
			kept := screener.Screen(ctx, request, endpoints)
			if len(kept) == 0 {
				result.FailClosed++
				continue
			}
			revisions := map[string]bool{}
			for _, e := range kept {
				revisions[e.GetMetadata().Labels[disaggregatedsetrollout.DefaultRevisionLabel]] = true
			}
			if len(revisions) > 1 {
				result.Mixed++
			}
			for revision := range revisions {
				result.Revisions[revision]++
			}
		}
		results = append(results, result)
	}
	return results
}

func podObject(pod rolloutPod) *unstructured.Unstructured {
	labels := map[string]any{}
	for k, v := range pod.Labels {
		labels[k] = v
	}
	status := "False"
	if pod.Ready {
		status = "True"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]any{"name": pod.Name, "namespace": "llm-d", "labels": labels},
		"status": map[string]any{
			"phase":      "Running",
			"conditions": []any{map[string]any{"type": "Ready", "status": status}},
		},
	}}
}

func labelledEndpoint(pod rolloutPod) scheduling.Endpoint {
	return scheduling.NewEndpoint(
		&fwkdl.EndpointMetadata{ID: k8stypes.NamespacedName{Namespace: "llm-d", Name: pod.Name}, Labels: pod.Labels},
		&fwkdl.Metrics{},
		nil,
	)
}

func endpoint(name string) scheduling.Endpoint {
	return scheduling.NewEndpoint(
		&fwkdl.EndpointMetadata{ID: k8stypes.NamespacedName{Namespace: "llm-d", Name: name}},
		&fwkdl.Metrics{},
		nil,
	)
}

func byName(endpoints []scheduling.Endpoint, name string) scheduling.Endpoint {
	for _, e := range endpoints {
		if e.GetMetadata().ID.Name == name {
			return e
		}
	}
	return endpoints[0]
}

// preferred is the one endpoint scored 1, or "" when the scorer abstains (all 0).
func preferred(scores map[scheduling.Endpoint]float64) string {
	best := ""
	for e, s := range scores {
		if s >= 1 {
			best = e.GetMetadata().ID.Name
		}
	}
	return best
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func emit(out output) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "routercheck:", err)
		os.Exit(1)
	}
}
