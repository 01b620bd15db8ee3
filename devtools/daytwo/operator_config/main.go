// operator-config: prometheus-operator's own scrape configuration for the day-two replay's
// Prometheus (devtools/daytwo/operator_config.py). One pass of the operator's reconciliation of a
// Prometheus object, without the StatefulSet: its ResourceSelector selects the ServiceMonitors and
// PodMonitors from the API server (validating them and reading the Secrets they reference into the
// asset store), and its ConfigGenerator writes the Prometheus configuration to stdout, as the
// operator writes it into the `prometheus-<name>` Secret. A monitor the selector rejects is an
// error (exit 1), named on stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus-operator/prometheus-operator/pkg/assets"
	monitoringclient "github.com/prometheus-operator/prometheus-operator/pkg/client/versioned"
	"github.com/prometheus-operator/prometheus-operator/pkg/operator"
	prompkg "github.com/prometheus-operator/prometheus-operator/pkg/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server to read the monitors from")
	promFile := flag.String("prometheus", "", "a monitoring.coreos.com/v1 Prometheus object (YAML)")
	flag.Parse()
	if err := run(*kubeconfig, *promFile); err != nil {
		fmt.Fprintln(os.Stderr, "operator-config:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, promFile string) error {
	data, err := os.ReadFile(promFile)
	if err != nil {
		return err
	}
	var p monitoringv1.Prometheus
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return fmt.Errorf("%s: %w", promFile, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	kclient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	mclient, err := monitoringclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// The operator selects monitor namespaces from a namespace informer's cache.
	nsInf := cache.NewSharedIndexInformer(
		cache.NewListWatchFromClient(kclient.CoreV1().RESTClient(), "namespaces", metav1.NamespaceAll, fields.Everything()),
		&corev1.Namespace{}, 0, cache.Indexers{},
	)
	go nsInf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nsInf.HasSynced) {
		return fmt.Errorf("the namespace informer did not sync")
	}

	store := assets.NewStoreBuilder(kclient.CoreV1(), kclient.CoreV1())
	recorder := operator.NewEventRecorderFactory(false)(kclient, "prometheus-operator")(&p)
	rs, err := prompkg.NewResourceSelector(logger, &p, store, nsInf, operator.NewMetrics(prometheus.NewRegistry()), recorder)
	if err != nil {
		return err
	}
	listOptions := func(sel labels.Selector) metav1.ListOptions {
		return metav1.ListOptions{LabelSelector: sel.String()}
	}
	smons, err := rs.SelectServiceMonitors(ctx, func(ns string, sel labels.Selector, add cache.AppendFunc) error {
		list, err := mclient.MonitoringV1().ServiceMonitors(ns).List(ctx, listOptions(sel))
		return appendItems(list, err, func(l *monitoringv1.ServiceMonitorList) []monitoringv1.ServiceMonitor { return l.Items }, add)
	})
	if err != nil {
		return err
	}
	pmons, err := rs.SelectPodMonitors(ctx, func(ns string, sel labels.Selector, add cache.AppendFunc) error {
		list, err := mclient.MonitoringV1().PodMonitors(ns).List(ctx, listOptions(sel))
		return appendItems(list, err, func(l *monitoringv1.PodMonitorList) []monitoringv1.PodMonitor { return l.Items }, add)
	})
	if err != nil {
		return err
	}
	rejected := append(rejections("ServiceMonitor", smons), rejections("PodMonitor", pmons)...)
	if len(rejected) > 0 {
		sort.Strings(rejected)
		return fmt.Errorf("the operator rejects %v", rejected)
	}

	// The operator passes WithEndpointSliceSupport when the cluster serves discovery.k8s.io/v1,
	// as every supported Kubernetes does; the role then follows spec.serviceDiscoveryRole.
	cg, err := prompkg.NewConfigGenerator(logger, &p, prompkg.WithEndpointSliceSupport())
	if err != nil {
		return err
	}
	conf, err := cg.GenerateServerConfiguration(&p, smons.ValidResources(), pmons.ValidResources(), nil, nil, store, nil, nil, nil, nil)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(conf)
	return err
}

// appendItems hands each item of a monitor list to the selector's append function (a pointer into
// the list, as the operator's informer cache would hand its objects).
func appendItems[L any, T any, P interface {
	*T
	runtime.Object
}](list L, err error, items func(L) []T, add cache.AppendFunc) error {
	if err != nil {
		return err
	}
	all := items(list)
	for i := range all {
		add(P(&all[i]))
	}
	return nil
}

// rejections names each monitor of a selection whose condition the selector set to false, with
// the selector's reason.
func rejections[T operator.ConfigurationResource](kind string, selection operator.TypedResourcesSelection[T]) []string {
	var rejected []string
	for key, res := range selection {
		if c := res.Conditions(); len(c) > 0 && c[0].Status != monitoringv1.ConditionTrue {
			rejected = append(rejected, fmt.Sprintf("%s %s: %s", kind, key, c[0].Message))
		}
	}
	return rejected
}
