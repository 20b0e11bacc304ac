package nrtadopt

// A node marked for foreign pods (as upstream's pod informer marks it when a pod it did not schedule takes
// exclusive resources there) on which no pod is bound: its object then says so (the empty set's fingerprint)
// with 1 free CPU per cell. The fixed plugin must flush the node from that object (Filter: cannot align a 2-CPU
// pod); upstream's own keeps it marked ("cannot find any pod for node"), so Filter says "invalid node topology data".

import (
	"strings"
	"testing"

	topologyv1alpha2 "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	"github.com/k8stopologyawareschedwg/podfingerprint"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podlisterv1 "k8s.io/client-go/listers/core/v1"
	k8scache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/pkg/noderesourcetopology"
)

const invalid = "Unschedulable (invalid node topology data)"

// fingerprint is the pod fingerprint of the pods named (namespace/name) as the node's publisher signs it.
func fingerprint(pods ...string) string {
	fp := podfingerprint.NewFingerprint(len(pods))
	for _, pod := range pods {
		namespace, name, _ := strings.Cut(pod, "/")
		_ = fp.Add(namespace, name)
	}
	return fp.Sign()
}

// signed is nrt(uid, freeCPUs) carrying the fingerprint of pods.
func signed(uid string, freeCPUs int64, pods ...string) topologyv1alpha2.NodeResourceTopology {
	object := nrt(uid, freeCPUs)
	object.Attributes = append(object.Attributes, topologyv1alpha2.AttributeInfo{Name: podfingerprint.Attribute, Value: fingerprint(pods...)})
	return object
}

func pod(name, phase string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodPhase(phase)}}
}

// markedAndEmptied starts the plugin on a node whose object counts one foreign pod, marks the node as upstream's
// pod informer would, checks the mark took effect, then publishes the node's object with no pod left.
func markedAndEmptied(t *testing.T, factory pluginFactory) fwk.Plugin {
	t.Helper()
	api := newFakeAPI(t)
	api.create(signed("uid-1", 4, "default/foreign"))
	plugin := newPlugin(t, api, factory, 1)
	cache, err := OverReserveOf(plugin)
	if err != nil || cache == nil {
		t.Fatalf("OverReserveOf: %v, %v", cache, err)
	}
	cache.NodeHasForeignPods(node, pod("foreign", "Pending"))
	if got := code(filter(t, plugin)); got != invalid {
		t.Fatalf("the mark did not take: Filter says %s, want %s", got, invalid)
	}
	api.update(signed("uid-1", 1))
	return plugin
}

func TestTheFixedPluginFlushesAMarkedNodeWithNoPodBound(t *testing.T) {
	plugin := markedAndEmptied(t, New)
	if got := eventually(t, plugin, "Unschedulable (cannot align"); got != "Unschedulable (cannot align container)" {
		t.Fatalf("Filter says %s; the node's object has no pod and 1 free CPU per cell for a 2-CPU pod", got)
	}
}

// When this fails, upstream's Resync handles nodes with no pod and numa-lab can drop Idle.
func TestUpstreamKeepsAMarkedNodeWithNoPodBoundMarked(t *testing.T) {
	plugin := markedAndEmptied(t, noderesourcetopology.New)
	if got := eventually(t, plugin, "Unschedulable (cannot align"); got != invalid {
		t.Fatalf("upstream's plugin says %s: its Resync now flushes a node with no pod bound; drop Idle", got)
	}
}

func TestSweepFlushesOnlyIdleNodesWhoseObjectSaysSo(t *testing.T) {
	cases := map[string]struct {
		pods   []*corev1.Pod
		object *topologyv1alpha2.NodeResourceTopology
		want   []string
	}{
		"no pod, object says none":                 {object: ptr.To(signed("uid-1", 1)), want: []string{node}},
		"a Failed pod only, object says none":      {pods: []*corev1.Pod{pod("rejected", "Failed")}, object: ptr.To(signed("uid-1", 1)), want: []string{node}},
		"a Pending pod bound: upstream's Resync's": {pods: []*corev1.Pod{pod("stuck", "Pending")}, object: ptr.To(signed("uid-1", 1))},
		"no pod, object still counts one":          {object: ptr.To(signed("uid-1", 1, "default/foreign"))},
		"a Running pod: upstream's Resync's node":  {pods: []*corev1.Pod{pod("app", "Running")}, object: ptr.To(signed("uid-1", 1))},
		"no object":                            {},
		"no pod, object without a fingerprint": {object: ptr.To(nrt("uid-1", 1))},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			api := newFakeAPI(t)
			api.create(signed("uid-1", 4, "default/foreign"))
			cache, _ := OverReserveOf(newPlugin(t, api, noderesourcetopology.New, 1)) // upstream's: no sweep of its own
			cache.NodeHasForeignPods(node, pod("foreign", "Pending"))
			pods := k8scache.NewIndexer(k8scache.MetaNamespaceKeyFunc, k8scache.Indexers{})
			for _, p := range tc.pods {
				_ = pods.Add(p)
			}
			objects := k8scache.NewStore(k8scache.MetaNamespaceKeyFunc)
			if tc.object != nil {
				_ = objects.Add(tc.object)
			}
			idle := &Idle{Adopter: &Adopter{Cache: cache, Log: klog.Background()}, Pods: podlisterv1.NewPodLister(pods),
				Objects: objects, Counted: func(p *corev1.Pod) bool { return Bound(klog.Background(), p) }}
			if got := idle.Sweep(); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("Sweep flushed %v, want %v", got, tc.want)
			}
			_, info := cache.GetCachedNRTCopy(t.Context(), node, probe)
			if info.Fresh != (len(tc.want) > 0) {
				t.Fatalf("after Sweep the node is fresh=%v, want %v", info.Fresh, len(tc.want) > 0)
			}
		})
	}
}
