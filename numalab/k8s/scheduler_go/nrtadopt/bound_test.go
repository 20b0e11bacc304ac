package nrtadopt

// A node whose object counts one Running pod and has 4 free CPUs in each of its 2 cells. The plugin reserves a
// 3-CPU pod there (the cache then holds 1 free CPU per cell: a 2-CPU pod cannot align), the node is marked for
// resync, and the object still counts the Running pod only: the kubelet has not admitted the new one. Upstream's
// Resync flushes the node then and forgets the reservation (a 2-CPU pod passes Filter, on CPUs the kubelet is
// about to give the first); the fixed plugin keeps it until the object shows the pod, then flushes.

import (
	"context"
	"testing"

	topologyv1alpha2 "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	podlisterv1 "k8s.io/client-go/listers/core/v1"
	k8scache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"sigs.k8s.io/scheduler-plugins/pkg/noderesourcetopology"
)

const cannotAlign = "Unschedulable (cannot align container)"

// guaranteed is pod(name, phase) asking cpus CPUs and 1Gi, unbound when node is "".
func guaranteed(name, phase, node string, cpus int64) *corev1.Pod {
	p := pod(name, phase)
	p.Spec.NodeName = node
	want := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse("1Gi")}
	p.Spec.Containers = []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: want, Limits: want}}}
	return p
}

// withFree is object with cell's available CPUs set to free.
func withFree(object topologyv1alpha2.NodeResourceTopology, cell int, free int64) topologyv1alpha2.NodeResourceTopology {
	object.Zones = append(topologyv1alpha2.ZoneList(nil), object.Zones...)
	resources := append(topologyv1alpha2.ResourceInfoList(nil), object.Zones[cell].Resources...)
	resources[0].Available = *resource.NewQuantity(free, resource.DecimalSI)
	object.Zones[cell].Resources = resources
	return object
}

// oneRunningOneUnbound starts the plugin on a node whose object counts one Running 1-CPU pod and has 4 free CPUs
// a cell, the informer holding that pod and an unbound 3-CPU pod named name (returned).
func oneRunningOneUnbound(t *testing.T, factory pluginFactory, name string) (fwk.Plugin, *fakeAPI, k8scache.Indexer, *corev1.Pod) {
	t.Helper()
	api := newFakeAPI(t)
	api.create(signed("uid-1", 4, "default/running"))
	plugin, pods := newPluginWithPods(t, api, factory, 1)
	_ = pods.Add(guaranteed("running", "Running", node, 1))
	unbound := guaranteed(name, "Pending", "", 3)
	_ = pods.Add(unbound)
	return plugin, api, pods, unbound
}

// reservedUnadmitted reserves a 3-CPU pod on the node through the plugin (checking the reservation took), shows
// it to the pod informer bound (Pending) or not yet (the bind under way), and marks the node for resync.
func reservedUnadmitted(t *testing.T, factory pluginFactory, bindSeen bool) (fwk.Plugin, *fakeAPI, k8scache.Indexer) {
	t.Helper()
	plugin, api, pods, inflight := oneRunningOneUnbound(t, factory, "inflight")
	if status := plugin.(fwk.ReservePlugin).Reserve(context.Background(), framework.NewCycleState(), inflight, node); !status.IsSuccess() {
		t.Fatalf("Reserve: %v", status)
	}
	if got := code(filter(t, plugin)); got != cannotAlign {
		t.Fatalf("the reservation did not take: Filter says %s, want %s", got, cannotAlign)
	}
	if bindSeen {
		_ = pods.Update(guaranteed("inflight", "Pending", node, 3))
	}
	cache, _ := OverReserveOf(plugin)
	cache.NodeMaybeOverReserved(node, inflight)
	return plugin, api, pods
}

func TestTheFixedPluginKeepsAReservationUntilTheObjectShowsThePod(t *testing.T) {
	for name, bindSeen := range map[string]bool{"bound, not admitted": true, "bind not seen yet": false} {
		t.Run(name, func(t *testing.T) {
			plugin, api, pods := reservedUnadmitted(t, New, bindSeen)
			if got := eventually(t, plugin, "Success"); got != cannotAlign {
				t.Fatalf("Filter says %s while the object does not show the 3-CPU pod; the reservation was forgotten", got)
			}
			// The kubelet admits the pod on cell 0 and the object shows it: now the cache may take the object.
			_ = pods.Update(guaranteed("inflight", "Running", node, 3))
			api.update(withFree(signed("uid-1", 4, "default/running", "default/inflight"), 0, 1))
			if got := eventually(t, plugin, "Success"); got != "Success" {
				t.Fatalf("Filter says %s; the object shows cell 1 with 4 free CPUs and counts every pod bound", got)
			}
			if held := plugin.(*Plugin).InFlight.Len(); held != 0 {
				t.Fatalf("%d pods still held in flight once the informer showed the pod bound", held)
			}
		})
	}
}

// Upstream's own plugin: the reason for bound.go. When this fails, upstream's resync no longer forgets a pod
// bound and not admitted, and numa-lab can drop Count.
func TestUpstreamForgetsAReservationTheObjectDoesNotShowYet(t *testing.T) {
	plugin, _, _ := reservedUnadmitted(t, noderesourcetopology.New, true)
	if got := eventually(t, plugin, "Success"); got != "Success" {
		t.Fatalf("upstream's plugin says %s: its resync kept the reservation of a pod not yet admitted", got)
	}
}

func TestTheResyncCountsBoundUnfinishedPodsAndHeldOnes(t *testing.T) {
	indexer := k8scache.NewIndexer(k8scache.MetaNamespaceKeyFunc, k8scache.Indexers{})
	for _, p := range []*corev1.Pod{guaranteed("running", "Running", node, 1), guaranteed("admitted", "Pending", node, 1),
		guaranteed("done", "Succeeded", node, 1), guaranteed("rejected", "Failed", node, 1),
		guaranteed("unbound", "Pending", "", 1), guaranteed("held", "Pending", "", 1), guaranteed("seen", "Pending", node, 1)} {
		_ = indexer.Add(p)
	}
	inFlight := NewInFlight()
	inFlight.Reserve(guaranteed("held", "Pending", "", 1), node)
	inFlight.Reserve(guaranteed("seen", "Pending", "", 1), node)    // the informer shows it bound already
	inFlight.Reserve(guaranteed("deleted", "Pending", "", 1), node) // gone from the informer
	lister := Lister{PodLister: podlisterv1.NewPodLister(indexer), InFlight: inFlight}
	listed, err := lister.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var counted []string
	for _, p := range listed {
		if Bound(klog.Background(), p) {
			counted = append(counted, p.Name)
		}
	}
	want := map[string]bool{"running": true, "admitted": true, "seen": true, "held": true}
	if len(counted) != len(want) {
		t.Fatalf("counted %v, want %v", counted, want)
	}
	for _, name := range counted {
		if !want[name] {
			t.Fatalf("counted %v, want %v", counted, want)
		}
	}
	if inFlight.Len() != 1 {
		t.Fatalf("%d pods held after the list, want 1 (held): seen is bound in the informer, deleted is gone", inFlight.Len())
	}
}

func TestHeldPodsArePrunedWithoutAResync(t *testing.T) {
	indexer := k8scache.NewIndexer(k8scache.MetaNamespaceKeyFunc, k8scache.Indexers{})
	_ = indexer.Add(guaranteed("bound", "Pending", node, 1))
	_ = indexer.Add(guaranteed("binding", "Pending", "", 1))
	inFlight := NewInFlight()
	for _, name := range []string{"bound", "binding", "deleted"} {
		inFlight.Reserve(guaranteed(name, "Pending", "", 1), node)
	}
	Lister{PodLister: podlisterv1.NewPodLister(indexer), InFlight: inFlight}.Prune()
	if inFlight.Len() != 1 {
		t.Fatalf("%d pods held after Prune, want 1 (binding): bound is bound in the informer, deleted is gone", inFlight.Len())
	}
}
