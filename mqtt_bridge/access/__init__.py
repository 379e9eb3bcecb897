"""Who may connect and what they may do: password_file.py (Mosquitto's format, PBKDF2-SHA512 hashes), acl_file.py
(Mosquitto's ACL rules: topic and pattern lines per user), and access_control.py, what the gateway asks of them
(authenticate a CONNECT, allow a topic for read, write or subscribe).
"""
