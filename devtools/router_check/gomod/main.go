// Command routercheck runs the pinned llm-d router's own code on a rendered EndpointPickerConfig:
// its config loader (strict decode, API version, feature gates), the factories of the llm-d 1.0
// plugins the fleet renders (strict parameter decode), and the session-key path of the
// session-affinity scorers on sample multi-turn conversations.
//
// Input (stdin, JSON): {"config": "<EndpointPickerConfig YAML>", "conversations": [{"name": "...",
// "turns": [{"headers": {...}}]}]}. Output (stdout, JSON): the loader's verdict, each plugin's
// verdict, and per conversation and turn the endpoint each session scorer prefers.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/go-logr/logr"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/llm-d/llm-d-router/pkg/epp/config/loader"
	"github.com/llm-d/llm-d-router/pkg/epp/flowcontrol"
	fwkdl "github.com/llm-d/llm-d-router/pkg/epp/framework/interface/datalayer"
	fwkplugin "github.com/llm-d/llm-d-router/pkg/epp/framework/interface/plugin"
	"github.com/llm-d/llm-d-router/pkg/epp/framework/interface/requestcontrol"
	"github.com/llm-d/llm-d-router/pkg/epp/framework/interface/scheduling"
	programaware "github.com/llm-d/llm-d-router/pkg/epp/framework/plugins/flowcontrol/fairness/program-aware"
	"github.com/llm-d/llm-d-router/pkg/epp/framework/plugins/requestcontrol/admitter/probabilisticadmitter"
	"github.com/llm-d/llm-d-router/pkg/epp/framework/plugins/requestcontrol/dataproducer/sessionid"
	"github.com/llm-d/llm-d-router/pkg/epp/framework/plugins/requestcontrol/requestheader/agentidentity"
	"github.com/llm-d/llm-d-router/pkg/epp/framework/plugins/scheduling/scorer/sessionaffinity"
)

type input struct {
	Config        string         `json:"config"`
	Conversations []conversation `json:"conversations"`
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
}

// The llm-d 1.0 plugins this checker builds with their own factories (the types the router
// registers for them); the rest of the config is checked by the loader's strict decode.
var factories = map[string]fwkplugin.FactoryFunc{
	agentidentity.PluginType:            agentidentity.PluginFactory,
	sessionid.SessionIDProducerType:     sessionid.Factory,
	sessionaffinity.SessionAffinityType: sessionaffinity.Factory,
	probabilisticadmitter.Type:          probabilisticadmitter.Factory,
	programaware.ProgramAwarePluginType: programaware.ProgramAwarePluginFactory,
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
