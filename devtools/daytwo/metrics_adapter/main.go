// Command metrics-adapter is the day-two replay's external-metrics stand-in for KEDA's metrics
// server (docs/day-two.md, "Scaling"): an aggregated API server for external.metrics.k8s.io/v1beta1
// built with sigs.k8s.io/custom-metrics-apiserver, which answers each metric the HPA asks for by
// evaluating the query of the rendered ScaledObject's Prometheus trigger against the replay's
// Prometheus.
//
// The metrics come from a JSON file (--metrics-config, written by devtools/daytwo/scaling.py):
//
//	{"prometheus": "http://127.0.0.1:PORT",
//	 "metrics": [{"namespace": "...", "scaledObject": "...", "metric": "s0-prometheus", "query": "..."}]}
//
// The HPA KEDA builds selects a metric by its name and the label
// scaledobject.keda.sh/name=<ScaledObject> (kedacore/keda controllers/keda/hpa.go
// getScaledObjectMetricSpecs). A query's result is read as KEDA's Prometheus scaler reads it
// with the trigger's defaults (pkg/scalers/prometheus_scaler.go ExecutePromQuery,
// ignoreNullValues true): no sample is 0, more than one sample is an error, an infinite value is
// 0; the value is served in milli-units (pkg/scalers/scaler.go GenerateMetricInMili). One
// difference: NaN, which KEDA passes on as it is, is served as 0.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/external_metrics"

	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// scaledObjectLabel is the label KEDA's HPA puts on its external metric's selector.
const scaledObjectLabel = "scaledobject.keda.sh/name"

type metric struct {
	Namespace    string `json:"namespace"`
	ScaledObject string `json:"scaledObject"`
	Metric       string `json:"metric"`
	Query        string `json:"query"`
}

type config struct {
	Prometheus string   `json:"prometheus"`
	Metrics    []metric `json:"metrics"`
}

type promProvider struct {
	cfg    config
	client *http.Client
}

func (p *promProvider) ListAllExternalMetrics() []provider.ExternalMetricInfo {
	seen := map[string]bool{}
	var out []provider.ExternalMetricInfo
	for _, m := range p.cfg.Metrics {
		if !seen[m.Metric] {
			seen[m.Metric] = true
			out = append(out, provider.ExternalMetricInfo{Metric: m.Metric})
		}
	}
	return out
}

func (p *promProvider) GetExternalMetric(ctx context.Context, namespace string, selector labels.Selector, info provider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	for _, m := range p.cfg.Metrics {
		if m.Namespace != namespace || m.Metric != info.Metric {
			continue
		}
		if !selector.Matches(labels.Set{scaledObjectLabel: m.ScaledObject}) {
			continue
		}
		value, err := p.query(ctx, m.Query)
		if err != nil {
			klog.Errorf("%s/%s %s: %v", namespace, m.ScaledObject, m.Metric, err)
			return nil, err
		}
		klog.V(2).Infof("%s/%s %s = %g", namespace, m.ScaledObject, m.Metric, value)
		return &external_metrics.ExternalMetricValueList{Items: []external_metrics.ExternalMetricValue{{
			MetricName:   info.Metric,
			MetricLabels: map[string]string{scaledObjectLabel: m.ScaledObject},
			Timestamp:    metav1.Now(),
			Value:        *resource.NewMilliQuantity(int64(value*1000), resource.DecimalSI),
		}}}, nil
	}
	return nil, fmt.Errorf("no external metric %q for %s in namespace %s", info.Metric, selector, namespace)
}

// query evaluates an instant query and reads its one sample as KEDA's Prometheus scaler does.
func (p *promProvider) query(ctx context.Context, q string) (float64, error) {
	u := p.cfg.Prometheus + "/api/v1/query?" + url.Values{"query": {q}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, fmt.Errorf("prometheus answered %s: %w", resp.Status, err)
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("prometheus: %s", body.Error)
	}
	var raw string
	switch body.Data.ResultType {
	case "vector":
		var samples []struct {
			Value [2]json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(body.Data.Result, &samples); err != nil {
			return 0, err
		}
		if len(samples) == 0 {
			return 0, nil
		}
		if len(samples) > 1 {
			return 0, fmt.Errorf("prometheus query %q returned multiple elements", q)
		}
		if err := json.Unmarshal(samples[0].Value[1], &raw); err != nil {
			return 0, err
		}
	case "scalar":
		var sample [2]json.RawMessage
		if err := json.Unmarshal(body.Data.Result, &sample); err != nil {
			return 0, err
		}
		if err := json.Unmarshal(sample[1], &raw); err != nil {
			return 0, err
		}
	default:
		return 0, fmt.Errorf("prometheus query %q returned a %s", q, body.Data.ResultType)
	}
	v, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		return 0, err
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, nil
	}
	return v, nil
}

type adapter struct {
	basecmd.AdapterBase
	configFile string
}

func main() {
	logs.InitLogs()
	defer logs.FlushLogs()
	cmd := &adapter{}
	cmd.Name = "llmd-fleet-twin-metrics-adapter"
	cmd.Flags().StringVar(&cmd.configFile, "metrics-config", "", "JSON file of the metrics to serve")
	logs.AddFlags(cmd.Flags())
	if err := cmd.Flags().Parse(os.Args); err != nil {
		klog.Fatalf("unable to parse flags: %v", err)
	}
	text, err := os.ReadFile(cmd.configFile)
	if err != nil {
		klog.Fatalf("--metrics-config: %v", err)
	}
	var cfg config
	if err := json.Unmarshal(text, &cfg); err != nil {
		klog.Fatalf("--metrics-config %s: %v", cmd.configFile, err)
	}
	cmd.WithExternalMetrics(&promProvider{cfg: cfg, client: &http.Client{Timeout: 10 * time.Second}})
	if err := cmd.Run(context.Background()); err != nil {
		klog.Fatalf("unable to run the metrics adapter: %v", err)
	}
}
