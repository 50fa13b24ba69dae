"""sdk.casing: the SDK's snake_case conversion of spec keys, case by case."""
import pytest

from ansible_kopf.sdk import casing


# The first block is the Operator SDK's own table (paramconv_test.go), kept verbatim so that
# a role written for the SDK sees the same variable names here.
@pytest.mark.parametrize(('key', 'expected'), [
    ('var', 'var'),
    ('888', '888'),
    ('k8s_var', 'k8s_var'),
    ('_k8s_var', '_k8s_var'),
    ('k8s var', 'k8s_var'),
    ('ThisShouldHaveUnderscores', '_this_should_have_underscores'),
    ('sizeK8sBuckets', 'size_k8s_buckets'),
    ('_CanYou_Handle_mixedVars', '_can_you_handle_mixed_vars'),
    ('this_should_be_a_noop', 'this_should_be_a_noop'),
    ('egressIPs', 'egress_ips'),
    ('egressIPsEgress', 'egress_ips_egress'),
    ('egressIPsegress', 'egress_ips_egress'),
    ('IPsegress', '_ips_egress'),
    ('egressIP', 'egress_ip'),
    ('egressIPEgress', 'egress_ip_egress'),
    ('egressIPegress', 'egress_ip_egress'),
    ('URLegressIPEgressHTTP', 'url_egress_ip_egress_http'),
    ('URLsegressIPsEgressHTTPs', '_urls_egress_ips_egress_https'),
    ('THIS_IS_SKIP_NOT_SK_IP', '_this_is_skip_not_sk_ip'),
    # This project's keys.
    ('storageSize', 'storage_size'),
    ('passwordSecretRef', 'password_secret_ref'),
    ('backupS3Bucket', 'backup_s3_bucket'),
    ('JSONData', '_json_data'),
    ('serverID', 'server_id'),
    ('', ''),
])
def test_to_snake(key: str, expected: str) -> None:
    assert casing.to_snake(key) == expected


def test_keys_to_snake_converts_nested_keys_and_lists_but_not_values() -> None:
    spec = {
        'storageSize': '1Gi',
        'passwordSecretRef': {'secretName': 'mysqlPassword', 'keyName': 'rootPassword'},
        'initUsers': [{'userName': 'appUser'}, 'plainString'],
        'replicas': 1,
    }
    assert casing.keys_to_snake(spec) == {
        'storage_size': '1Gi',
        'password_secret_ref': {'secret_name': 'mysqlPassword', 'key_name': 'rootPassword'},
        'init_users': [{'user_name': 'appUser'}, 'plainString'],
        'replicas': 1,
    }
