package nrtadopt

// Upstream's Resync (pkg/noderesourcetopology/cache, OverReserve.Resync) maps the pods its pod lister holds to
// their nodes, keeping those its filter counts (bound, unfinished ones: bound.go), and skips every marked
// node that has no such pod: "cannot find any pod for node" ("this really should never happen"). It happens on
// any node with no pod bound: a node whose last pod ended after it was marked stays marked (with upstream's
// own filter, Running pods only, so did a node whose only pod was stuck Pending). GetCachedNRTCopy then
// answers Fresh=false for a node with foreign pods, Filter says "invalid node topology data", and the node
// takes no NUMA-aware pod until some pod is bound there, which on a node kept for pinned pods may never happen.
//
// The fix: at the cache's resync period, each node GetDesyncedNodes names on which no counted pod is left is
// flushed from its object when the object's pod fingerprint is the empty set's: the check Resync makes for a
// node with pods, made for a node with none (the empty set's fingerprint equals the object's).

import (
	topologyv1alpha2 "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	"github.com/k8stopologyawareschedwg/podfingerprint"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	podlisterv1 "k8s.io/client-go/listers/core/v1"
	k8scache "k8s.io/client-go/tools/cache"
)

// Idle flushes marked nodes that have no counted pod from their objects, when those say the node has none.
type Idle struct {
	Adopter *Adopter
	// Pods and Counted are the Resync's pod lister and filter (bound.go's Lister and Bound).
	Pods    podlisterv1.PodLister
	Counted func(*corev1.Pod) bool
	// Objects is the store of the adopter's informer: the node's latest object, as Resync's Get would read it.
	Objects k8scache.Store
}

// Sweep flushes every marked node with no counted pod whose object's fingerprint is the empty set's; it returns
// the nodes it flushed.
func (i *Idle) Sweep() []string {
	marked := i.Adopter.Cache.GetDesyncedNodes(i.Adopter.Log).MaybeOverReserved
	if len(marked) == 0 {
		return nil
	}
	pods, err := i.Pods.List(labels.Everything())
	if err != nil {
		i.Adopter.Log.Error(err, "listing pods for idle nodes")
		return nil
	}
	busy := map[string]bool{}
	for _, pod := range pods {
		if i.Counted(pod) {
			busy[pod.Spec.NodeName] = true
		}
	}
	var flushed []string
	for _, name := range marked {
		if busy[name] {
			continue // upstream's Resync checks this node's fingerprint against its pods
		}
		obj, found, err := i.Objects.GetByKey(name)
		nrt, ok := obj.(*topologyv1alpha2.NodeResourceTopology)
		if err != nil || !found || !ok || !Empty(nrt) {
			continue // no object yet, or it still counts pods that are gone: its publisher has not caught up
		}
		i.Adopter.Log.Info("adopting NodeResourceTopology", "node", name,
			"reason", "marked for resync with no pod bound (upstream skips it), its object's fingerprint the empty set's",
			"uid", nrt.UID, "resourceVersion", nrt.ResourceVersion)
		i.Adopter.Cache.FlushNodes(i.Adopter.Log, nrt.DeepCopy())
		flushed = append(flushed, name)
	}
	return flushed
}

// Empty says whether nrt's pod fingerprint (the attribute, or the older annotation) is that of no pod at all.
func Empty(nrt *topologyv1alpha2.NodeResourceTopology) bool {
	sign := nrt.Annotations[podfingerprint.Annotation]
	for _, attr := range nrt.Attributes {
		if attr.Name == podfingerprint.Attribute {
			sign = attr.Value
		}
	}
	return sign != "" && podfingerprint.NewFingerprint(0).Check(sign) == nil
}
