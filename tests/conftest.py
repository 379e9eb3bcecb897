import logging

logging.getLogger("core").setLevel(logging.INFO)
