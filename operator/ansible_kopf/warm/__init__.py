"""
Warm Ansible servers: ``ansible-playbook`` and module processes forked from servers that
imported Ansible once, instead of started (and importing it) for every run.

Three kinds of process take part; each module says in its name where it runs:

==============  ==========================  =============================================
module          runs in                     owns
==============  ==========================  =============================================
``pool``        the operator                which servers exist, starting, stopping,
                                            retiring them; the command and interpreter a
                                            run uses to reach them
``forkserver``  a server process            accept a request, fork a child, supervise it
``child``       a child forked by a server  become ``ansible-playbook`` or run a module
``client``      a process per run / module  hand a run to a server, wait, exit as it did
``wire``        server and client           the message format; which environment
                                            variables may differ between runs
``preloads``    a server process            what a server imports before it forks
``entry``       the operator                how a fresh Python finds this package
``files``       the operator                files rewritten only when they change
``templates``   a playbook server and its   compiled Jinja templates kept in files
                runs and task workers       between runs
``waits``       a playbook server and its   a run's controller woken by its tasks'
                runs                        results instead of polling for them
==============  ==========================  =============================================

One reconcile through it (the operator side is :mod:`ansible_kopf.run.launchers`):

1. The warm launcher asks :class:`pool.Pool` for the command of the run; the pool starts
   a playbook server for the run's environment and the module server if they are not
   running (``python -c <entry> ...``: :mod:`forkserver`, which imports :mod:`preloads`
   and prints ``ready``), and returns ``python -IS -c <entry> playbook SOCKET --
   ansible-playbook ...`` (:mod:`client`).
2. ansible-runner spawns that command on its pseudo-terminal. The client sends argv,
   environment, directory and its three descriptors over the socket (:mod:`wire`).
3. The playbook server forks; the child (:mod:`child`) takes the descriptors, starts a
   session and calls ``ansible.cli.playbook.main``: the run's events reach ansible-runner
   as from a spawned ``ansible-playbook``. The server tells the client the child's pid,
   later its exit status; the client exits with it.
4. Each module call runs the inventory's interpreter, a script the pool wrote
   (:func:`pool.Pool.interpreter`): the client's ``python`` mode sends the AnsiballZ
   payload to the module server, whose child runs it as ``python`` would.

Nothing here imports kopf or the rest of :mod:`ansible_kopf` (the build checks it), and
this ``__init__`` imports nothing: the client imports the package in a Python started
with ``-I -S``, where every import is paid by every run.
"""
