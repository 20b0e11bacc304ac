package nrtadopt

// Upstream's Resync lists the pods once, then reads each marked node's object from the API in turn and flushes
// the nodes whose fingerprints matched, all at the end (MakeNRTUpdatesForNodes, then FlushNodes). A pod this
// plugin reserves on such a node after the list began is in neither the list nor the object, and the flush drops
// its reservation all the same. With most nodes marked (a filling fleet), the reads take a good part of a second:
// numa-lab's fleet bench still saw 0 to 3 kubelet rejections per thousand-pod side after bound.go.
//
// The fix: the pods reserved since the resync's list began are held per node (Window), and Filter reserves them
// again on the node it is asked about before upstream's Filter reads the cache. A reservation is a map entry
// keyed by the pod (resourceStore.AddPod), so reserving a held pod the cache still holds changes nothing, and
// the object a flush took never accounts for such a pod (its fingerprint would then count a pod the list did
// not). The next list starts a new window: the pods of the old one are in it, bound or held in flight (bound.go).

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

// WindowMost is how long a pod stays held when no list begins (no node marked): a resync's reads never take
// that long, and the set stays bounded.
const WindowMost = time.Minute

type held struct {
	pod   *corev1.Pod
	since time.Time
}

// Window holds, per node, the pods reserved there since the latest list of the cache's resync began.
type Window struct {
	mu    sync.Mutex
	nodes map[string]map[types.UID]held
	clock func() time.Time
}

// NewWindow is an empty Window on the wall clock.
func NewWindow() *Window { return &Window{nodes: map[string]map[types.UID]held{}, clock: time.Now} }

// Reserved holds pod on node.
func (w *Window) Reserved(pod *corev1.Pod, node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.nodes[node] == nil {
		w.nodes[node] = map[types.UID]held{}
	}
	w.nodes[node][pod.UID] = held{pod: pod, since: w.clock()}
}

// Unreserved lets pod go.
func (w *Window) Unreserved(pod *corev1.Pod, node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.nodes[node], pod.UID)
}

// Listed begins a new window: the resync's list is beginning.
func (w *Window) Listed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nodes = map[string]map[types.UID]held{}
}

// On is the pods held on node, forgetting those held longer than WindowMost.
func (w *Window) On(node string) []*corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	var pods []*corev1.Pod
	for uid, h := range w.nodes[node] {
		if w.clock().Sub(h.since) > WindowMost {
			delete(w.nodes[node], uid)
			continue
		}
		pods = append(pods, h.pod)
	}
	return pods
}

// Filter reserves the pods held on the node again (see the file's comment), then is upstream's.
func (p *Plugin) Filter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	if node := nodeInfo.Node(); node != nil && p.Window != nil {
		for _, held := range p.Window.On(node.Name) {
			p.Cache.ReserveNodeResources(node.Name, held)
		}
	}
	return p.TopologyMatch.Filter(ctx, state, pod, nodeInfo)
}
