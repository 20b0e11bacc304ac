package nrtadopt

// Upstream's plugin, built by New as kube-scheduler builds it, against a small API server of this test that
// serves NodeResourceTopology objects (discovery, list, get, watch). A Guaranteed pod asking 2 CPUs meets a
// node whose object the cache could not have listed at start; with a single-numa-node policy and 1 free CPU
// per cell, Filter must say Unschedulable, as it does for an object listed at start.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	topologyv1alpha2 "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	k8scache "k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	apiconfig "sigs.k8s.io/scheduler-plugins/apis/config"
	"sigs.k8s.io/scheduler-plugins/pkg/noderesourcetopology"
)

const (
	group   = "topology.node.k8s.io"
	version = "v1alpha2"
	plural  = "noderesourcetopologies"
	node    = "worker-1"
	// How long the fixed plugin may take to see an object, and how long the unfixed one is watched not to.
	settle = 3 * time.Second
)

type pluginFactory func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error)

// fakeAPI keeps NodeResourceTopology objects and the events that made them, for lists, gets and watches.
type fakeAPI struct {
	mu      sync.Mutex
	changed *sync.Cond
	rv      int
	objects map[string]topologyv1alpha2.NodeResourceTopology
	events  []event
	server  *httptest.Server
	// onGet, when set, is called with the name of each object read alone (as a resync reads it), before the answer.
	onGet func(name string)
}

type event struct {
	rv     int
	kind   string
	object topologyv1alpha2.NodeResourceTopology
}

func newFakeAPI(t *testing.T) *fakeAPI {
	api := &fakeAPI{objects: map[string]topologyv1alpha2.NodeResourceTopology{}}
	api.changed = sync.NewCond(&api.mu)
	api.server = httptest.NewServer(http.HandlerFunc(api.serve))
	t.Cleanup(api.server.Close)
	return api
}

func (api *fakeAPI) record(kind string, nrt topologyv1alpha2.NodeResourceTopology) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.rv++
	nrt.ResourceVersion = strconv.Itoa(api.rv)
	if kind == "DELETED" {
		delete(api.objects, nrt.Name)
	} else {
		api.objects[nrt.Name] = nrt
	}
	api.events = append(api.events, event{api.rv, kind, nrt})
	api.changed.Broadcast()
}

func (api *fakeAPI) create(nrt topologyv1alpha2.NodeResourceTopology) { api.record("ADDED", nrt) }
func (api *fakeAPI) update(nrt topologyv1alpha2.NodeResourceTopology) { api.record("MODIFIED", nrt) }
func (api *fakeAPI) remove(nrt topologyv1alpha2.NodeResourceTopology) { api.record("DELETED", nrt) }

func (api *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	base := "/apis/" + group + "/" + version
	switch path := r.URL.Path; {
	case path == "/api":
		reply(w, metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
	case path == "/apis":
		gv := metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + version, Version: version}
		reply(w, metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups: []metav1.APIGroup{{Name: group, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}}})
	case path == base:
		reply(w, metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: group + "/" + version, APIResources: []metav1.APIResource{{
				Name: plural, SingularName: "noderesourcetopology", Kind: "NodeResourceTopology",
				Verbs: metav1.Verbs{"get", "list", "watch"}}}})
	case path == base+"/"+plural && r.URL.Query().Get("watch") == "true":
		api.watch(w, r)
	case path == base+"/"+plural:
		api.mu.Lock()
		list := topologyv1alpha2.NodeResourceTopologyList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(api.rv)}}
		for _, nrt := range api.objects {
			list.Items = append(list.Items, nrt)
		}
		api.mu.Unlock()
		list.Kind, list.APIVersion = "NodeResourceTopologyList", group+"/"+version
		reply(w, list)
	case strings.HasPrefix(path, base+"/"+plural+"/"):
		name := strings.TrimPrefix(path, base+"/"+plural+"/")
		api.mu.Lock()
		onGet := api.onGet
		api.mu.Unlock()
		if onGet != nil {
			onGet(name)
		}
		api.mu.Lock()
		nrt, ok := api.objects[name]
		api.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			reply(w, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure",
				Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound})
			return
		}
		reply(w, nrt)
	default:
		http.NotFound(w, r)
	}
}

// watch streams the events after the asked resourceVersion until the client goes away.
func (api *fakeAPI) watch(w http.ResponseWriter, r *http.Request) {
	since, _ := strconv.Atoi(r.URL.Query().Get("resourceVersion"))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	go func() { // wake the loop below when the client leaves
		<-r.Context().Done()
		api.mu.Lock()
		api.changed.Broadcast()
		api.mu.Unlock()
	}()
	api.mu.Lock()
	defer api.mu.Unlock()
	for r.Context().Err() == nil {
		for _, ev := range api.events {
			if ev.rv <= since {
				continue
			}
			since = ev.rv
			line, _ := json.Marshal(map[string]any{"type": ev.kind, "object": ev.object})
			_, _ = w.Write(append(line, '\n'))
		}
		w.(http.Flusher).Flush()
		api.changed.Wait()
	}
}

func reply(w http.ResponseWriter, body any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// nrt is a single-numa-node object with two cells of freeCPUs each, under uid.
func nrt(uid string, freeCPUs int64) topologyv1alpha2.NodeResourceTopology {
	zone := func(name string) topologyv1alpha2.Zone {
		return topologyv1alpha2.Zone{Name: name, Type: "Node", Resources: topologyv1alpha2.ResourceInfoList{
			{Name: "cpu", Capacity: resource.MustParse("4"), Allocatable: resource.MustParse("4"),
				Available: *resource.NewQuantity(freeCPUs, resource.DecimalSI)},
			{Name: "memory", Capacity: resource.MustParse("4Gi"), Allocatable: resource.MustParse("4Gi"),
				Available: resource.MustParse("4Gi")},
		}}
	}
	return topologyv1alpha2.NodeResourceTopology{
		TypeMeta:   metav1.TypeMeta{Kind: "NodeResourceTopology", APIVersion: group + "/" + version},
		ObjectMeta: metav1.ObjectMeta{Name: node, UID: types.UID(uid)},
		Zones:      topologyv1alpha2.ZoneList{zone("node-0"), zone("node-1")},
		Attributes: topologyv1alpha2.AttributeList{
			{Name: "topologyManagerPolicy", Value: "single-numa-node"},
			{Name: "topologyManagerScope", Value: "container"},
		},
	}
}

// handle is the part of kube-scheduler's framework handle the plugin uses outside a framework.
type handle struct {
	fwk.Handle
	config  *rest.Config
	factory informers.SharedInformerFactory
}

func (h handle) KubeConfig() *rest.Config                               { return h.config }
func (h handle) SharedInformerFactory() informers.SharedInformerFactory { return h.factory }

// newPlugin builds the plugin with the lab's cache settings (numalab/model/numa_scheduler.py) but a 1 s resync.
func newPlugin(t *testing.T, api *fakeAPI, factory pluginFactory, resyncSeconds int64) fwk.Plugin {
	plugin, _ := newPluginWithPods(t, api, factory, resyncSeconds)
	return plugin
}

// newPluginWithPods is newPlugin, and the indexer of the scheduler's pod informer (never started: the test
// fills it, as the informer would from the API).
func newPluginWithPods(t *testing.T, api *fakeAPI, factory pluginFactory, resyncSeconds int64) (fwk.Plugin, k8scache.Indexer) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// kube-scheduler's client speaks protobuf (clientConnection.contentType); the API answers JSON for objects of a CRD.
	config := &rest.Config{Host: api.server.URL, ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf"}}
	pods := informers.NewSharedInformerFactory(kubernetes.NewForConfigOrDie(config), 0)
	args := &apiconfig.NodeResourceTopologyMatchArgs{
		ScoringStrategy:          apiconfig.ScoringStrategy{Type: apiconfig.LeastAllocated},
		CacheResyncPeriodSeconds: resyncSeconds,
		Cache: &apiconfig.NodeResourceTopologyCache{
			InformerMode:      ptr.To(apiconfig.CacheInformerShared),
			ForeignPodsDetect: ptr.To(apiconfig.ForeignPodsDetectOnlyExclusiveResources),
			ResyncMethod:      ptr.To(apiconfig.CacheResyncAutodetect),
			ResyncScope:       ptr.To(apiconfig.CacheResyncScopeOnlyResources),
		},
	}
	plugin, err := factory(ctx, args, handle{config: config, factory: pods})
	if err != nil {
		t.Fatalf("building the plugin: %v", err)
	}
	return plugin, pods.Core().V1().Pods().Informer().GetIndexer()
}

// filter runs the plugin's Filter for a Guaranteed pod asking 2 CPUs on node.
func filter(t *testing.T, plugin fwk.Plugin) *fwk.Status {
	t.Helper()
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pinned", UID: "pod-uid"},
		Spec: corev1.PodSpec{SchedulerName: "numa-aware", Containers: []corev1.Container{
			{Name: "app", Resources: corev1.ResourceRequirements{Requests: want, Limits: want}}}},
	}
	info := framework.NewNodeInfo()
	info.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}, Status: corev1.NodeStatus{
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("8Gi")},
	}})
	return plugin.(fwk.FilterPlugin).Filter(context.Background(), framework.NewCycleState(), pod, info)
}

func code(status *fwk.Status) string {
	if status.IsSuccess() {
		return "Success"
	}
	return fmt.Sprintf("%s (%s)", status.Code(), status.Message())
}

// eventually is the Filter verdict once it says want, or the last one after settle.
func eventually(t *testing.T, plugin fwk.Plugin, want string) string {
	t.Helper()
	deadline := time.Now().Add(settle)
	for {
		got := code(filter(t, plugin))
		if strings.HasPrefix(got, want) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// scenarios: what the API holds when the scheduler starts, and what happens to it afterwards.
var scenarios = map[string]struct {
	atStart func(*fakeAPI)
	after   func(*fakeAPI)
}{
	"created after start": {
		atStart: func(*fakeAPI) {},
		after:   func(api *fakeAPI) { api.create(nrt("uid-1", 1)) },
	},
	"deleted with its Node, made again for the re-registered Node": {
		atStart: func(api *fakeAPI) { api.create(nrt("uid-old", 4)) },
		after: func(api *fakeAPI) {
			api.remove(nrt("uid-old", 4))
			api.create(nrt("uid-new", 1))
		},
	},
}

func TestTheFixedPluginUsesObjectsMadeAfterItStarted(t *testing.T) {
	for name, scenario := range scenarios {
		t.Run(name, func(t *testing.T) {
			api := newFakeAPI(t)
			scenario.atStart(api)
			plugin := newPlugin(t, api, New, 1)
			if got := code(filter(t, plugin)); got != "Success" {
				t.Fatalf("before: Filter says %s; the pod fits (or the node has no object yet)", got)
			}
			scenario.after(api)
			if got := eventually(t, plugin, "Unschedulable"); got != "Unschedulable (cannot align container)" {
				t.Fatalf("after: Filter says %s; the node's object has 1 free CPU per cell for a 2-CPU pod", got)
			}
		})
	}
}

// Upstream's own plugin, unfixed: the reason for this package. When this fails, upstream fixed #967 and
// numa-lab can drop nrtadopt.
func TestUpstreamIgnoresObjectsMadeAfterItStarted(t *testing.T) {
	for name, scenario := range scenarios {
		t.Run(name, func(t *testing.T) {
			api := newFakeAPI(t)
			scenario.atStart(api)
			plugin := newPlugin(t, api, noderesourcetopology.New, 1)
			scenario.after(api)
			if got := eventually(t, plugin, "Unschedulable"); got != "Success" {
				t.Fatalf("upstream's plugin says %s: scheduler-plugins#967 looks fixed; drop nrtadopt", got)
			}
		})
	}
}

func TestOnlyTheOverReserveCacheIsAdopted(t *testing.T) {
	api := newFakeAPI(t)
	fixed := newPlugin(t, api, New, 1)
	if cache, err := OverReserveOf(fixed); err != nil || cache == nil {
		t.Fatalf("OverReserveOf(upstream's plugin, resync 1 s) = %v, %v; want its OverReserve cache", cache, err)
	}
	passthrough := newPlugin(t, api, New, 0) // no resync: upstream reads the API at every Filter
	if cache, err := OverReserveOf(passthrough); err != nil || cache != nil {
		t.Fatalf("OverReserveOf(passthrough plugin) = %v, %v; want nil, nil", cache, err)
	}
	type stranger struct{ fwk.Plugin }
	if _, err := OverReserveOf(&stranger{}); err == nil || !strings.Contains(err.Error(), "has no field nrtCache") {
		t.Fatalf("OverReserveOf(another plugin) error = %v; want one naming the field", err)
	}
}
