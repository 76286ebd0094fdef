"""The bodies of the lcm_* tools, one module per tool family.

tools.py is the front door (dispatch, argument checking, the bounded JSON answer); the modules
here hold what each tool does, on the services a :class:`toolkit.Ctx` hands them. They never
import tools.py nor the engine.
"""
