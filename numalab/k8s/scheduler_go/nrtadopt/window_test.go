package nrtadopt

// A marked node whose object counts its one Running pod, 4 free CPUs a cell. While the resync reads that object
// (after it listed the pods), the plugin reserves a 3-CPU pod there and the informer shows it bound. The object
// still matches the list, so the resync flushes the node: upstream's plugin then passes a 2-CPU pod (the 3-CPU
// pod's reservation gone, the kubelet about to give it 3 of a cell's 4 CPUs); the fixed one does not.

import (
	"context"
	"sync"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"sigs.k8s.io/scheduler-plugins/pkg/noderesourcetopology"
)

// reservedWhileRead runs that story and returns Filter's verdict once the resync has flushed the node.
func reservedWhileRead(t *testing.T, factory pluginFactory) string {
	t.Helper()
	plugin, api, pods, late := oneRunningOneUnbound(t, factory, "late")
	var once sync.Once
	read := make(chan struct{})
	api.mu.Lock()
	api.onGet = func(name string) {
		once.Do(func() {
			if status := plugin.(fwk.ReservePlugin).Reserve(context.Background(), framework.NewCycleState(), late, node); !status.IsSuccess() {
				t.Errorf("Reserve: %v", status)
			}
			_ = pods.Update(guaranteed("late", "Pending", node, 3)) // bound, not admitted
			close(read)
		})
	}
	api.mu.Unlock()
	cache, _ := OverReserveOf(plugin)
	_, before := cache.GetCachedNRTCopy(t.Context(), node, probe)
	cache.NodeMaybeOverReserved(node, late)
	select {
	case <-read:
	case <-time.After(settle):
		t.Fatalf("the resync never read the marked node's object")
	}
	for deadline := time.Now().Add(settle); ; time.Sleep(10 * time.Millisecond) {
		if _, info := cache.GetCachedNRTCopy(t.Context(), node, probe); info.Generation > before.Generation {
			break // flushed
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resync did not flush the node after reading its object (the fault did not take)")
		}
	}
	return code(filter(t, plugin))
}

func TestTheFixedPluginKeepsAPodReservedWhileTheResyncReads(t *testing.T) {
	if got := reservedWhileRead(t, New); got != cannotAlign {
		t.Fatalf("Filter says %s; the 3-CPU pod reserved during the resync's read was forgotten", got)
	}
}

// Upstream's own plugin: the reason for window.go.
func TestUpstreamForgetsAPodReservedWhileTheResyncReads(t *testing.T) {
	if got := reservedWhileRead(t, noderesourcetopology.New); got != "Success" {
		t.Fatalf("upstream's plugin says %s: its resync kept a reservation made while it read the objects", got)
	}
}

func TestTheWindowHoldsPodsUntilTheNextListOrAMinute(t *testing.T) {
	now := time.Unix(1000, 0)
	w := NewWindow()
	w.clock = func() time.Time { return now }
	w.Reserved(guaranteed("a", "Pending", "", 1), node)
	w.Reserved(guaranteed("b", "Pending", "", 1), node)
	w.Reserved(guaranteed("c", "Pending", "", 1), "worker-3")
	w.Unreserved(guaranteed("b", "Pending", "", 1), node)
	if got := w.On(node); len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("held on %s: %v, want a (b was unreserved, c is another node's)", node, got)
	}
	now = now.Add(WindowMost + time.Second)
	if got := w.On(node); len(got) != 0 {
		t.Fatalf("held %v past WindowMost", got)
	}
	w.Reserved(guaranteed("d", "Pending", "", 1), node)
	w.Listed()
	if got := w.On(node); len(got) != 0 {
		t.Fatalf("held %v after a list began", got)
	}
}
