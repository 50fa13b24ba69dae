# Entry points. `make run` and `make test` do all set-up on a fresh machine (see README).
SHELL := /bin/bash
.DEFAULT_GOAL := help

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/; s/\$$\$$/\$$/g'

test:  ## lint + unit + integration tests (brings up the local cluster unless KUBECONFIG is set)
	./hack/test.sh

run:  ## run the operator against $$KUBECONFIG or the local cluster, with the sample MySQL object
	./hack/run.sh

molecule:  ## molecule test -s $$s (s=role or s=operator) against $$KUBECONFIG or the local cluster
	./hack/molecule.sh $(s)

lint:  ## linters only
	./hack/test.sh --lint-only

cluster-up:  ## start the local single-node cluster (builds and caches on first run)
	./cluster/cluster.sh up

cluster-down:  ## stop the local cluster
	./cluster/cluster.sh down

cluster-status:  ## show what runs
	./cluster/cluster.sh status

cluster-purge:  ## stop the local cluster and delete its state
	./cluster/cluster.sh purge

.PHONY: help test run molecule lint cluster-up cluster-down cluster-status cluster-purge
