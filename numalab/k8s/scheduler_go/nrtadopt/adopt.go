// Package nrtadopt is numa-lab's fix for kubernetes-sigs/scheduler-plugins#967 ("NodeResourceTopology
// objects *created* after scheduler startup are ignored"), written against scheduler-plugins v0.35.4-devel.
//
// The cause, in pkg/noderesourcetopology/cache: NewOverReserve fills its nrtStore once, from one List
// (newNrtStore). After that an object enters the store only through OverReserve.FlushNodes, which Resync calls
// for the nodes GetDesyncedNodes names: nodes Filter marked with NodeMaybeOverReserved (only after a NUMA check
// failed, which needs the node's object), nodes with foreign pods (NodeHasForeignPods returns early when
// nrtStore.Contains is false) and, with resyncScope All, nodes whose attributes changed (Watcher.ProcessEvent
// handles only Modified events and drops them for a node the store lacks: "modified non-existent NRT").
// A node missing from the store is never any of these, so it stays missing: GetCachedNRTCopy returns nil with
// Fresh set, and Filter and Score then pass the node with no NUMA check at all. The store never forgets an
// object either, so when a Node is deleted (its object goes with it, owned by the Node) and registers again,
// the object made for it (a new UID) stays hidden behind the old one until a Filter failure makes Resync read it.
//
// The fix, without touching upstream's code: New builds upstream's plugin and returns it as it is (every
// extension point, every behaviour upstream's), then watches NodeResourceTopology objects and hands the cache,
// through its exported FlushNodes, each object whose node the cache lacks or holds under another UID: what the
// cache's own List would have loaded had the scheduler been started now. Objects the cache already holds are
// left to upstream's Resync (pod fingerprints). The cache sits in an unexported field of upstream's plugin;
// OverReserveOf reads it by reflection and refuses, naming the field, when this plugin version has no such
// field, so a changed upstream stops the scheduler at start instead of silently dropping the fix. Which pods a
// resync counts (upstream forgets a pod bound but not yet admitted) is bound.go's, a pod reserved while a resync
// reads the objects window.go's; a node marked for resync with no pod bound, which upstream's Resync skips for
// good, is idle.go's.
package nrtadopt

import (
	"context"
	"fmt"
	"reflect"
	"time"
	"unsafe"

	"github.com/go-logr/logr"
	topologyv1alpha2 "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	k8scache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	apiconfig "sigs.k8s.io/scheduler-plugins/apis/config"
	"sigs.k8s.io/scheduler-plugins/pkg/noderesourcetopology"
	nrtcache "sigs.k8s.io/scheduler-plugins/pkg/noderesourcetopology/cache"
)

// CacheField is the unexported field of upstream's TopologyMatch that holds its nrtcache.Interface.
const CacheField = "nrtCache"

// New is noderesourcetopology.New, whose OverReserve cache is also handed the objects it would miss (this file),
// resyncs a node only once its object accounts for every pod bound there (bound.go), keeps the pods reserved
// while a resync reads (window.go), and flushes marked nodes with no pod (idle.go).
func New(ctx context.Context, args runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
	plugin, err := noderesourcetopology.New(ctx, args, handle)
	if err != nil {
		return nil, err
	}
	cache, err := OverReserveOf(plugin)
	if err != nil {
		return nil, err
	}
	if cache == nil {
		return plugin, nil // Passthrough and DiscardReserved read the object from the API at every Filter
	}
	match, ok := plugin.(*noderesourcetopology.TopologyMatch)
	if !ok { // OverReserveOf found upstream's cache field, so this is upstream's struct under another pointer type
		return nil, fmt.Errorf("%T is not *noderesourcetopology.TopologyMatch: numa-lab's resync fix cannot wrap it", plugin)
	}
	lh := klog.FromContext(ctx).WithName("nrtadopt")
	inFlight, window := NewInFlight(), NewWindow()
	pods, err := Count(cache, inFlight, window.Listed)
	if err != nil {
		return nil, err
	}
	lh.Info("resyncing a node only once its object accounts for every pod bound there, reserved ones included")
	scheme := runtime.NewScheme()
	if err := topologyv1alpha2.AddToScheme(scheme); err != nil {
		return nil, err
	}
	client, err := ctrlclient.NewWithWatch(handle.KubeConfig(), ctrlclient.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("numa-lab's NodeResourceTopology adopter: %w", err)
	}
	adopter := &Adopter{Cache: cache, Log: lh}
	objects, err := Watch(ctx, adopter, ListWatch(client))
	if err != nil {
		return nil, err
	}
	lh.Info("handing the cache NodeResourceTopology objects created after it started (scheduler-plugins#967)")
	matchArgs, _ := args.(*apiconfig.NodeResourceTopologyMatchArgs) // upstream's New refused any other type
	sweeping := pods
	sweeping.OnList = nil // the sweep's lists are not the resync's
	idle := &Idle{Adopter: adopter, Pods: sweeping, Objects: objects, Counted: func(pod *corev1.Pod) bool { return Bound(lh, pod) }}
	period := time.Duration(matchArgs.CacheResyncPeriodSeconds) * time.Second
	go wait.UntilWithContext(ctx, func(context.Context) { pods.Prune(); idle.Sweep() }, period)
	lh.Info("flushing marked nodes with no pod bound from objects that say so (upstream's Resync skips them)")
	return &Plugin{TopologyMatch: match, Cache: cache, InFlight: inFlight, Window: window}, nil
}

// Plugin is upstream's plugin, every extension point its own, whose Reserve and Unreserve also keep InFlight and
// Window, and whose Filter first reserves again on the node the pods Window holds there (window.go).
type Plugin struct {
	*noderesourcetopology.TopologyMatch
	Cache    *nrtcache.OverReserve
	InFlight *InFlight
	Window   *Window
}

// Reserve is upstream's, and holds pod as bound to nodeName until the pod informer shows it so.
func (p *Plugin) Reserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	status := p.TopologyMatch.Reserve(ctx, state, pod, nodeName)
	if status.IsSuccess() {
		p.InFlight.Reserve(pod, nodeName)
		p.Window.Reserved(pod, nodeName)
	}
	return status
}

// Unreserve is upstream's, and forgets pod.
func (p *Plugin) Unreserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) {
	p.TopologyMatch.Unreserve(ctx, state, pod, nodeName)
	p.InFlight.Unreserve(pod)
	p.Window.Unreserved(pod, nodeName)
}

// OverReserveOf is the OverReserve cache of upstream's plugin, or nil when it keeps another kind of cache.
func OverReserveOf(plugin fwk.Plugin) (*nrtcache.OverReserve, error) {
	if ours, ok := plugin.(*Plugin); ok {
		plugin = ours.TopologyMatch
	}
	value := reflect.ValueOf(plugin)
	want := reflect.TypeOf((*nrtcache.Interface)(nil)).Elem()
	if value.Kind() != reflect.Pointer || value.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("%T is not upstream's TopologyMatch: numa-lab's fix for scheduler-plugins#967 "+
			"cannot reach its cache", plugin)
	}
	field := value.Elem().FieldByName(CacheField)
	if !field.IsValid() || field.Type() != want {
		return nil, fmt.Errorf("%T has no field %s of type %v: numa-lab's fix for scheduler-plugins#967 "+
			"(numalab/k8s/scheduler_go/nrtadopt) must be updated for this scheduler-plugins version", plugin, CacheField, want)
	}
	// The field's own type, at its own address: a read, with the memory safety of an ordinary one.
	cache := reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem().Interface()
	overReserve, _ := cache.(*nrtcache.OverReserve)
	return overReserve, nil
}

// Adopter hands an OverReserve cache the objects its store lacks.
type Adopter struct {
	Cache *nrtcache.OverReserve
	Log   logr.Logger
}

// probe is the pod GetCachedNRTCopy wants for its logs: the adopter asks about a node, for no pod.
var probe = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "nrtadopt-probe"}}

// Offer hands nrt to the cache when the cache lacks its node or holds an older object of that name (another
// UID); it says whether it did. FlushNodes also drops what the cache assumed for the node: the cache then
// starts that node afresh, as it starts every node at scheduler start.
func (a *Adopter) Offer(nrt *topologyv1alpha2.NodeResourceTopology) bool {
	cached, info := a.Cache.GetCachedNRTCopy(context.Background(), nrt.Name, probe)
	if !info.Fresh {
		return false // held for foreign pods: upstream's Resync (or Idle, with no pod there) reads its object
	}
	if cached != nil && cached.UID == nrt.UID {
		return false // known: upstream's Resync refreshes it when the pod fingerprints say so
	}
	reason := "created after the cache was filled"
	if cached != nil {
		reason = fmt.Sprintf("made again (uid %s, the cache had %s)", nrt.UID, cached.UID)
	}
	a.Log.Info("adopting NodeResourceTopology", "node", nrt.Name, "reason", reason, "resourceVersion", nrt.ResourceVersion)
	a.Cache.FlushNodes(a.Log, nrt)
	return true
}

// Watch runs an informer on lw until ctx ends, offering every added or updated object to the adopter; it
// returns the informer's store.
func Watch(ctx context.Context, adopter *Adopter, lw k8scache.ListerWatcher) (k8scache.Store, error) {
	informer := k8scache.NewSharedIndexInformer(lw, &topologyv1alpha2.NodeResourceTopology{}, 0, k8scache.Indexers{})
	offer := func(obj any) {
		if nrt, ok := obj.(*topologyv1alpha2.NodeResourceTopology); ok {
			adopter.Offer(nrt)
		}
	}
	_, err := informer.AddEventHandler(k8scache.ResourceEventHandlerFuncs{
		AddFunc:    offer,
		UpdateFunc: func(_, obj any) { offer(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("numa-lab's NodeResourceTopology adopter: %w", err)
	}
	go informer.RunWithContext(ctx)
	return informer.GetStore(), nil
}

// plainListWatch lists, then watches: a cluster has one object per node, and the API's streamed list
// (WatchListClient) would only add a code path to get wrong.
type plainListWatch struct{ *k8scache.ListWatch }

func (plainListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// ListWatch lists and watches NodeResourceTopology objects with the client upstream's cache uses.
func ListWatch(client ctrlclient.WithWatch) k8scache.ListerWatcher {
	return plainListWatch{&k8scache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			list := &topologyv1alpha2.NodeResourceTopologyList{}
			return list, client.List(ctx, list, &ctrlclient.ListOptions{Raw: &options})
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, &topologyv1alpha2.NodeResourceTopologyList{}, &ctrlclient.ListOptions{Raw: &options})
		},
	}}
}
