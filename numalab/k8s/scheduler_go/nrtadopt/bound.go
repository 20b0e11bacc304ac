package nrtadopt

// Upstream's Resync (OverReserve.MakeNRTUpdatesForNodes, then FlushNodes) replaces a marked node's cached object
// with the API's when the object's pod fingerprint equals that of the pods its filter counts there, and drops
// every reservation it held for the node. With the shared informer the filter counts Running pods only
// (podprovider.IsPodRelevantShared). A pod this scheduler bound a moment ago is not Running yet, and its kubelet
// has not admitted it, so the object does not account for it either: both sets lack it, the fingerprints agree,
// the flush forgets its reservation, and the next pod is placed on CPUs the first will take. The kubelet then
// turns one of them away (TopologyAffinityError). A burst shows it: numa-lab's fleet bench saw 4 to 15 such
// rejections per thousand-pod fill while its simulated kubelets ran 1 to 4 s behind the binds.
//
// The fix counts, for the resync, what the cache's reservations stand for: every pod bound to the node that
// has not finished (Pending or Running), and every pod this plugin reserved whose binding the pod informer does
// not show yet (the bind call and its watch event still under way). numa-align fingerprints every pod the
// kubelet's PodResources lists (admitted, not terminated: a pod stuck Pending in ImagePullBackOff included), so
// the two agree exactly when every pod bound to the node has been admitted and the object accounts for it.
// A pod bound and not admitted keeps the node's reservations until the object shows it; a rejected pod is Failed
// and counted by neither. The resync's pod lister and filter are fields of the cache, set once by its
// constructor: Counting replaces both (see Count), before the scheduler runs its first cycle.

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	podlisterv1 "k8s.io/client-go/listers/core/v1"

	nrtcache "sigs.k8s.io/scheduler-plugins/pkg/noderesourcetopology/cache"
	"sigs.k8s.io/scheduler-plugins/pkg/noderesourcetopology/podprovider"
)

// The OverReserve fields Resync reads its pods through.
const (
	ListerField = "podLister"
	FilterField = "isPodRelevant"
)

// Bound is the resync's pod filter: a pod bound to a node that has not finished.
func Bound(_ logr.Logger, pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// InFlight holds the pods the plugin reserved on a node until the pod lister shows them bound (or gone).
type InFlight struct {
	mu   sync.Mutex
	pods map[types.UID]*corev1.Pod // copies, spec.nodeName set to the node reserved
}

// NewInFlight is an empty InFlight.
func NewInFlight() *InFlight { return &InFlight{pods: map[types.UID]*corev1.Pod{}} }

// Reserve records pod as bound to node from now on.
func (f *InFlight) Reserve(pod *corev1.Pod, node string) {
	bound := pod.DeepCopy()
	bound.Spec.NodeName = node
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods[pod.UID] = bound
}

// Unreserve forgets pod (its scheduling cycle failed after Reserve).
func (f *InFlight) Unreserve(pod *corev1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pods, pod.UID)
}

// Len is how many pods are held.
func (f *InFlight) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pods)
}

// pending is the held pods lister does not show bound, forgetting those it does (or no longer holds).
func (f *InFlight) pending(lister podlisterv1.PodLister) []*corev1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	var pods []*corev1.Pod
	for uid, held := range f.pods {
		current, err := lister.Pods(held.Namespace).Get(held.Name)
		if apierrors.IsNotFound(err) || (err == nil && (current.UID != uid || current.Spec.NodeName != "")) {
			delete(f.pods, uid) // the informer has it bound now, or it was deleted
			continue
		}
		pods = append(pods, held)
	}
	return pods
}

// Prune forgets the held pods the informer shows bound (or no longer holds): the resync lists only while a node is
// marked, so without it a cluster whose nodes are never marked would keep every pod it ever reserved.
func (l Lister) Prune() { l.InFlight.pending(l.PodLister) }

// Lister is the pod lister the resync reads: the informer's pods and the in-flight ones it does not show bound.
type Lister struct {
	podlisterv1.PodLister
	InFlight *InFlight
	// OnList, when set, is called as a list begins (the resync's: window.go).
	OnList func()
}

// List is the informer's pods matching selector, and the in-flight pods matching it as bound to their nodes.
func (l Lister) List(selector labels.Selector) ([]*corev1.Pod, error) {
	if l.OnList != nil {
		l.OnList()
	}
	pods, err := l.PodLister.List(selector)
	if err != nil {
		return nil, err
	}
	for _, pod := range l.InFlight.pending(l.PodLister) {
		if selector.Matches(labels.Set(pod.Labels)) {
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// Count makes cache's resync count the Bound pods of the lister upstream gave it and of inFlight, calling onList
// (may be nil) as each list begins; it returns the lister it installed. New calls it right after upstream's constructor, whose Resync loop has then found no
// marked node to read the fields for: nothing has been scheduled yet.
func Count(cache *nrtcache.OverReserve, inFlight *InFlight, onList func()) (Lister, error) {
	field, err := fieldOf(cache, ListerField, reflect.TypeOf((*podlisterv1.PodLister)(nil)).Elem())
	if err != nil {
		return Lister{}, err
	}
	upstream, _ := field.Interface().(podlisterv1.PodLister)
	if _, ours := upstream.(Lister); ours {
		return Lister{}, fmt.Errorf("the cache's pod lister is numa-lab's already: Count called twice")
	}
	filter, err := fieldOf(cache, FilterField, reflect.TypeOf(podprovider.PodFilterFunc(nil)))
	if err != nil {
		return Lister{}, err
	}
	installed := Lister{PodLister: upstream, InFlight: inFlight, OnList: onList}
	field.Set(reflect.ValueOf(podlisterv1.PodLister(installed)))
	filter.Set(reflect.ValueOf(podprovider.PodFilterFunc(Bound)))
	return installed, nil
}

// fieldOf is cache's unexported field name, settable, refused (naming the field) when this upstream version has
// no such field of type want.
func fieldOf(cache *nrtcache.OverReserve, name string, want reflect.Type) (reflect.Value, error) {
	field := reflect.ValueOf(cache).Elem().FieldByName(name)
	if !field.IsValid() || field.Type() != want {
		return reflect.Value{}, fmt.Errorf("%T has no field %s of type %v: numa-lab's resync fix "+
			"(numalab/k8s/scheduler_go/nrtadopt) must be updated for this scheduler-plugins version", cache, name, want)
	}
	// The field's own type, at its own address: an ordinary read and write, only past the export check.
	return reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem(), nil
}
