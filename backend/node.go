package backend

// Node is one ks.yaml node: a master and (later) its replicas.
type Node struct {
	Name   string
	Master *Pool
}

// NewNode creates a node and its master pool.
func NewNode(name, master string, opts Options) *Node {
	return &Node{Name: name, Master: NewPool(name, master, opts)}
}

// Close closes the node's pools.
func (n *Node) Close() { n.Master.Close() }
