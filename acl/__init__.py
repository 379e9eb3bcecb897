"""RocketMQ's plain ACL: plain_acl.yml read into accounts and permissions, and the decisions; shared by the gRPC
endpoint (proxy/) and the remoting port (broker_remoting/). Above the core, it uses only what `core` exports.

    acl_file.py         plain_acl.yml (ACL 1.0) read into an AccessControl, refusing what it cannot use with
                        `file:line:column`
    access_control.py   the accounts, Action (PUB, SUB, ANY) and ResourceKind (topic, group), and the decision
                        (AccessControl.check), after RocketMQ's PlainPermissionChecker
    errors.py           Unauthenticated, Forbidden, AclFileError

Who signed a request is each door's own scheme (proxy/signature.py for gRPC's metadata, remoting/acl_signature.py
for remoting's extFields), checked against AccessControl.secret_keys; what each request needs is each door's own
table of Actions.
"""
