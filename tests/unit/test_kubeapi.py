"""kubeapi.path: where the operator reads a watched object and patches its status."""

import kopf

from ansible_kopf import kubeapi


def test_a_namespaced_custom_resource_is_under_apis() -> None:
    mysqls = kopf.Resource('otus.homework', 'v1', 'mysqls', namespaced=True)
    assert (kubeapi.path(mysqls, namespace='ns', name='db', subresource='status')
            == '/apis/otus.homework/v1/namespaces/ns/mysqls/db/status')


def test_the_core_group_is_under_api() -> None:
    configmaps = kopf.Resource('', 'v1', 'configmaps', namespaced=True)
    assert kubeapi.path(configmaps, namespace='ns', name='cm') == '/api/v1/namespaces/ns/configmaps/cm'


def test_a_cluster_scoped_kind_has_no_namespace() -> None:
    nodes = kopf.Resource('', 'v1', 'nodes', namespaced=False)
    crds = kopf.Resource('apiextensions.k8s.io', 'v1', 'customresourcedefinitions', namespaced=False)
    assert kubeapi.path(nodes, namespace=None, name='n1') == '/api/v1/nodes/n1'
    assert (kubeapi.path(crds, namespace=None, name='x.y')
            == '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x.y')
