package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/keyshard/keyshard/proxy/blacklist"
	"github.com/keyshard/keyshard/proxy/cluster"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/control"
)

// etcdFlags adds the etcd connection flags (TLS, credentials) to fs.
func etcdFlags(fs *flag.FlagSet) *cluster.Options {
	o := &cluster.Options{}
	fs.StringVar(&o.CACert, "etcd-cacert", "", "")
	fs.StringVar(&o.Cert, "etcd-cert", "", "")
	fs.StringVar(&o.Key, "etcd-key", "", "")
	fs.StringVar(&o.User, "etcd-user", "", "")
	fs.StringVar(&o.Password, "etcd-password", "", "")
	return o
}

const configUsage = `usage:
  keyshard config push [-rev N] [-force] [-blacklist FILE] FILE URL
                         validate FILE, then make it the shared config at URL
                         (etcd://host:port[,host:port...]/prefix). Refused if
                         it moves rows of existing sharded tables from where
                         the running instances look for them (unless -force),
                         or, with -rev, if the document is no longer at
                         revision N (what pull said: an admin change or
                         another push came since); -blacklist also replaces
                         the SQL blacklist
  keyshard config pull URL
                         print the shared config document (its revision on
                         stderr)
  keyshard config diff FILE URL
                         the differences from the shared document to FILE;
                         exit 0 if none, 1 if some

etcd TLS and credentials: -etcd-cacert, -etcd-cert, -etcd-key, -etcd-user,
-etcd-password flags (before the arguments), or KEYSHARD_ETCD_CACERT,
KEYSHARD_ETCD_CERT, KEYSHARD_ETCD_KEY, KEYSHARD_ETCD_USER,
KEYSHARD_ETCD_PASSWORD; etcds:// turns TLS on with the system's CAs.
`

// configCmd is `keyshard config push|pull|diff`.
func configCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" {
		fmt.Fprint(stdout, configUsage)
		return 0
	}
	fs := flag.NewFlagSet("keyshard config", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts := etcdFlags(fs)
	force := fs.Bool("force", false, "")
	blackFile := fs.String("blacklist", "", "")
	rev := fs.Int64("rev", 0, "")
	want := map[string]int{"push": 2, "pull": 1, "diff": 2}[args[0]]
	if err := fs.Parse(args[1:]); err != nil || want == 0 || fs.NArg() != want || *rev < 0 ||
		args[0] != "push" && (*force || *blackFile != "" || *rev != 0) {
		fmt.Fprint(stderr, configUsage)
		return 2
	}
	rawURL := fs.Arg(want - 1)
	if !cluster.IsURL(rawURL) {
		fmt.Fprintf(stderr, "keyshard config: %q is not an etcd URL (etcd://host:port/prefix)\n", rawURL)
		return 2
	}
	// diff's exit status is diff(1)'s: 1 differs, 2 trouble.
	trouble := map[bool]int{true: 2, false: 1}[args[0] == "diff"]
	store, st, err := openShared(rawURL, opts.FromEnv())
	if err != nil {
		fmt.Fprintln(stderr, "keyshard config:", err)
		return trouble
	}
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	switch args[0] {
	case "pull":
		if st.ConfigRev == 0 {
			fmt.Fprintf(stderr, "keyshard config: %s: no config document yet (keyshard config push FILE URL writes one)\n", store.Source())
			return 1
		}
		_, _ = stdout.Write(st.Config)
		fmt.Fprintf(stderr, "%s: revision %d (keyshard config push -rev %d pushes only over this one)\n", store.Source(), st.ConfigRev, st.ConfigRev)
		return 0
	case "diff":
		file, err := os.ReadFile(fs.Arg(0))
		if err != nil {
			fmt.Fprintln(stderr, "keyshard config:", err)
			return 2
		}
		d := unifiedDiff(store.Source(), fs.Arg(0), string(st.Config), string(file))
		if d == "" {
			return 0
		}
		fmt.Fprint(stdout, d)
		return 1
	}
	if *rev != 0 && *rev != st.ConfigRev {
		fmt.Fprintf(stderr, "keyshard config: nothing pushed: the shared document is at revision %d, not %d: it changed since "+
			"(an admin change or another push). Pull it, carry your edit over, push again\n", st.ConfigRev, *rev)
		return 1
	}
	return push(ctx, store, st, fs.Arg(0), *blackFile, *force, *rev != 0, stdout, stderr)
}

// masterChanges lists the nodes of old whose master next changes: a push
// of an old file would undo a failover (or an operator's change) and send
// writes to a former master.
func masterChanges(old, next *config.Config) []string {
	var out []string
	for _, n := range old.Nodes {
		if nn, ok := next.Node(n.Name); ok && nn.Master != n.Master {
			out = append(out, fmt.Sprintf("node %s: master %s -> %s", n.Name, n.Master, nn.Master))
		}
	}
	return out
}

// running returns the config documents the live instances run (by
// revision), or the stored one if none is listed or an older one is gone
// from etcd's history: what a push must not move rows away from.
func running(ctx context.Context, store *cluster.Store, st cluster.State) map[int64][]byte {
	docs := map[int64][]byte{}
	if st.ConfigRev != 0 {
		docs[st.ConfigRev] = st.Config
	}
	members, _, err := store.Members(ctx)
	if err != nil || len(members) == 0 {
		return docs
	}
	out := map[int64][]byte{}
	for _, m := range members {
		if _, ok := out[m.ConfigRev]; ok || m.ConfigRev == 0 {
			continue
		}
		doc, ok := docs[m.ConfigRev]
		if !ok {
			if doc, err = store.ConfigAt(ctx, m.ConfigRev); err != nil || doc == nil {
				return docs
			}
		}
		out[m.ConfigRev] = doc
	}
	return out
}

// push is `keyshard config push` (revChecked: -rev named the revision
// the file was pulled at).
func push(ctx context.Context, store *cluster.Store, st cluster.State, path, blackFile string, force, revChecked bool, stdout, stderr io.Writer) int {
	doc, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, "keyshard config:", err)
		return 1
	}
	next, warnings, err := config.Parse(doc, path)
	for _, w := range warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%v\nkeyshard config: nothing pushed\n", err)
		return 1
	}
	// Only -rev passes (-force is for row moves): a master changed in
	// the shared document is a failover an old copy would undo.
	if st.ConfigRev != 0 && !revChecked {
		if old, _, err := config.Parse(st.Config, store.Source()); err == nil {
			if ch := masterChanges(old, next); len(ch) > 0 {
				fmt.Fprintf(stderr, "keyshard config: nothing pushed: %s changes a node's master:\n  %s\nA failover or an operator may have "+
					"changed it in the shared document since your copy was made: pushing an old copy would send writes to a former master. "+
					"Pull (it prints the revision) and push with -rev N.\n", path, strings.Join(ch, "\n  "))
				return 1
			}
		}
	}
	for rev, doc := range running(ctx, store, st) {
		old, _, err := config.Parse(doc, store.Source())
		if err != nil {
			continue
		}
		if moves := control.PlacementChanges(old, next); len(moves) > 0 && !force {
			fmt.Fprintf(stderr, "keyshard config: nothing pushed: %s changes where the rows of existing sharded tables are looked for "+
				"(against revision %d, which instances run):\n  %s\nRows already written would seem lost. Move them first, then push with -force.\n",
				path, rev, strings.Join(moves, "\n  "))
			return 1
		}
	}
	var black []byte
	if blackFile != "" {
		if black, err = os.ReadFile(blackFile); err == nil {
			_, err = blacklist.Parse(black)
		}
		if err != nil {
			fmt.Fprintf(stderr, "keyshard config: nothing pushed: blacklist %s: %v\n", blackFile, err)
			return 1
		}
	}
	if st.ConfigRev != 0 && bytes.Equal(st.Config, doc) && !force && (black == nil || bytes.Equal(black, st.Blacklist)) {
		fmt.Fprintf(stdout, "%s: unchanged (revision %d)\n", store.Source(), st.ConfigRev)
		return 0
	}
	var rev int64
	switch {
	case black != nil && st.ConfigRev != 0 && bytes.Equal(st.Config, doc) && !force:
		// The document as it is: only the blacklist (the document's
		// revision, which others may hold for -rev, stays).
		rev, err = store.PutBlacklist(ctx, black, st.BlacklistRev, st.Blacklist)
	case black != nil:
		// Both or neither.
		rev, err = store.PutBoth(ctx, doc, st.ConfigRev, force, black, st.BlacklistRev)
	default:
		rev, err = store.PutConfig(ctx, doc, st.ConfigRev, st.Config, force)
	}
	if errors.Is(err, cluster.ErrConflict) {
		fmt.Fprintf(stderr, "keyshard config: nothing pushed: %v; pull it, look, and push again\n", err)
		return 1
	}
	if err != nil {
		fmt.Fprintln(stderr, "keyshard config: nothing pushed:", err)
		return 1
	}
	what := path
	if black != nil {
		what += " and blacklist " + blackFile
	}
	fmt.Fprintf(stdout, "%s: %s pushed, revision %d (was %d)\n", store.Source(), what, rev, st.ConfigRev)
	return 0
}

// openShared connects to the etcd of rawURL and reads the shared state
// (the store is closed again on an error).
func openShared(rawURL string, o cluster.Options) (*cluster.Store, cluster.State, error) {
	store, err := cluster.Open(rawURL, o)
	if err != nil {
		return nil, cluster.State{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	st, err := store.Read(ctx)
	if err != nil {
		store.Close()
		return nil, st, err
	}
	return store, st, nil
}

// loadShared reads the config document at rawURL for serving.
func loadShared(rawURL string, o cluster.Options) (*cluster.Store, cluster.State, *config.Config, []string, error) {
	store, st, err := openShared(rawURL, o)
	if err == nil && st.ConfigRev == 0 {
		store.Close()
		err = fmt.Errorf("%s: no config document yet; write one with: keyshard config push FILE %s", store.Source(), store.Source())
	}
	if err != nil {
		return nil, st, nil, nil, err
	}
	cfg, warnings, err := config.Parse(st.Config, store.Source())
	if err != nil {
		store.Close()
		return nil, st, nil, warnings, err
	}
	return store, st, cfg, warnings, nil
}
